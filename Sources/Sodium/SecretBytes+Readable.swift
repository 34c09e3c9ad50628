extension SecretBytes {
    /// Keeps this secret readable while `body` runs, without lending its
    /// bytes, so that many short seals or opens with it inside change no
    /// page protection, as protd's own key work does. For callers outside
    /// this package that time such work (the benchmarks).
    public func whileReadable<R>(_ body: () throws -> R) throws -> R {
        try withUnsafeBytes { _ in try body() }
    }
}
