internal import CSodium

/// Runs `sodium_init` exactly once, before any other libsodium call.
enum SodiumRuntime {
    /// Evaluated lazily and thread-safely by Swift's global initialisation.
    private static let initialisation: Int32 = sodium_init()

    /// Makes sure libsodium is initialised; it fails only when the library
    /// cannot find a source of randomness.
    static func ensureInitialised() throws(SodiumError) {
        if initialisation < 0 {
            throw SodiumError(.initialisationFailed, "libsodium could not initialise (no randomness source?)")
        }
    }
}
