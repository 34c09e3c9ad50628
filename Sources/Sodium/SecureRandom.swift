internal import CSodium

/// Non-secret randomness (nonces, salts, file ids) from libsodium's CSPRNG.
/// Keys are made with `SecretBytes.random(count:)` instead.
public enum SecureRandom {
    /// `count` random bytes.
    public static func bytes(_ count: Int) throws -> [UInt8] {
        try SodiumRuntime.ensureInitialised()
        var result = [UInt8](repeating: 0, count: count)
        if count > 0 {
            result.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        }
        return result
    }

    /// Fills `buffer` with random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        try SodiumRuntime.ensureInitialised()
        if let base = buffer.baseAddress, buffer.count > 0 {
            randombytes_buf(base, buffer.count)
        }
    }
}
