internal import CSodium

/// Runs `sodium_init` exactly once, before any other libsodium call.
public enum SodiumRuntime {
    /// Evaluated lazily and thread-safely by Swift's global initialisation.
    private static let initialisation: Int32 = sodium_init()

    /// The version of the libsodium linked in (`sodium_version_string()`),
    /// e.g. "1.0.18", Debian 12's.
    public static var version: String { String(cString: sodium_version_string()) }

    /// Makes sure libsodium is initialised; it fails only when the library
    /// cannot find a source of randomness.
    static func ensureInitialised() throws(SodiumError) {
        if initialisation < 0 {
            throw SodiumError(.initialisationFailed, "libsodium could not initialise (no randomness source?)")
        }
    }
}
