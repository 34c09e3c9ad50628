/// A failure inside the libsodium layer. The message never contains secret
/// bytes; it says what failed and, where useful, what to do.
public struct SodiumError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure happened.
    public enum Code: Sendable, Equatable {
        /// `sodium_init` failed.
        case initialisationFailed
        /// Guarded memory could not be allocated.
        case allocationFailed
        /// Guarded memory could not be locked in RAM and
        /// `MemoryLocking.requireLocked` is set.
        case memoryNotLocked
        /// A secret was used after it had been wiped.
        case secretWiped
        /// An input had the wrong length (key, nonce, salt...).
        case invalidLength
        /// Authenticated decryption failed: wrong key or tampered data.
        case authenticationFailed
        /// Argon2id could not run (usually not enough memory for the cost).
        case keyDerivationFailed
        /// A key-derivation cost outside libsodium's allowed range.
        case invalidCost
        /// The CPU lacks what the algorithm needs (AES-256-GCM, AEGIS-256:
        /// AES-NI), or for AEGIS-256 the linked libsodium (before 1.0.19).
        case unsupportedCPU
    }

    /// What kind of failure happened.
    public let code: Code
    /// A sentence for a person; contains no secret material.
    public let message: String

    /// Makes an error with a code and a human message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
