public import Sodium

/// The cipher that seals a file's content segments. The raw value is the
/// algorithm byte of the file header (docs/FORMAT.md); a file keeps the
/// cipher it was created with, and is read with it whatever the store's
/// setting for new files (AES-256-GCM files only on a CPU with AES-NI).
public enum ContentCipher: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// XChaCha20-Poly1305: runs on every CPU.
    case xChaCha20Poly1305 = 1
    /// AES-256-GCM with a subkey per segment (`AES256GCMRandomNonce`):
    /// faster where the CPU has AES-NI, unusable where it has not.
    case aes256GCM = 2

    /// What new files get when the configuration does not say: AES-256-GCM
    /// where this CPU runs it, else XChaCha20-Poly1305.
    public static var preferred: ContentCipher { aes256GCM.isAvailable ? .aes256GCM : .xChaCha20Poly1305 }

    /// Whether this CPU can seal and open with it.
    public var isAvailable: Bool {
        switch self {
        case .xChaCha20Poly1305: true
        case .aes256GCM: AES256GCMRandomNonce.isAvailable
        }
    }

    /// The configuration name, e.g. `aes-256-gcm`.
    public var description: String {
        switch self {
        case .xChaCha20Poly1305: "xchacha20-poly1305"
        case .aes256GCM: "aes-256-gcm"
        }
    }

    /// Parses a configuration name; `nil` for anything else.
    public init?(name: String) {
        guard let cipher = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = cipher
    }

    /// The libsodium construction behind it.
    public var aead: any RandomNonceAEAD.Type {
        switch self {
        case .xChaCha20Poly1305: XChaCha20Poly1305.self
        case .aes256GCM: AES256GCMRandomNonce.self
        }
    }
}

/// How new files are laid out: segment size and cipher.
struct ContentFormat: Sendable, Equatable {
    /// Plaintext bytes per segment.
    var segmentSize: Int
    var cipher: ContentCipher
}
