public import Sodium

/// The cipher that seals a file's content segments. The raw value is the
/// algorithm byte of the file header (docs/FORMAT.md); a file keeps the
/// cipher it was created with, and is read with it whatever the store's
/// setting for new files (AES-256-GCM and AEGIS-256 files only on a CPU
/// with AES instructions).
public enum ContentCipher: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// XChaCha20-Poly1305: runs on every CPU.
    case xChaCha20Poly1305 = 1
    /// AES-256-GCM with a subkey per segment (`AES256GCMRandomNonce`):
    /// faster where the CPU has AES-NI, unusable where it has not.
    case aes256GCM = 2
    /// AEGIS-256 with a 32-byte nonce and a 32-byte tag: about three times
    /// as fast as AES-256-GCM where the CPU has AES instructions, unusable
    /// where it has not (and with a libsodium older than 1.0.19).
    case aegis256 = 3

    /// What new files get when the configuration does not say: the fastest
    /// this CPU and the linked libsodium run: AEGIS-256 (libsodium 1.0.19 or
    /// later and AES instructions), then AES-256-GCM (AES-NI), else
    /// XChaCha20-Poly1305 (docs/DESIGN.md, section Ciphers).
    public static var preferred: ContentCipher {
        [.aegis256, .aes256GCM].first(where: \.isAvailable) ?? .xChaCha20Poly1305
    }

    /// Whether this CPU can seal and open with it.
    public var isAvailable: Bool {
        switch self {
        case .xChaCha20Poly1305: true
        case .aes256GCM: AES256GCMRandomNonce.isAvailable
        case .aegis256: AEGIS256.isAvailable
        }
    }

    /// What running it needs that this machine or this build lacks, for
    /// messages: e.g. `libsodium 1.0.19 or later (this protd links 1.0.18)`;
    /// `nil` where it runs.
    public var unmetRequirement: String? {
        guard !isAvailable else { return nil }
        switch self {
        case .xChaCha20Poly1305: return nil
        case .aegis256 where !AEGIS256.isInLinkedLibsodium:
            return "libsodium \(AEGIS256.minimumLibsodiumVersion) or later (this protd links \(SodiumRuntime.version))"
        case .aegis256: return "a CPU with AES instructions (AES-NI), which this machine lacks"
        case .aes256GCM: return "a CPU with AES-NI and PCLMUL, which this machine lacks"
        }
    }

    /// The configuration name, e.g. `aes-256-gcm`.
    public var description: String {
        switch self {
        case .xChaCha20Poly1305: "xchacha20-poly1305"
        case .aes256GCM: "aes-256-gcm"
        case .aegis256: "aegis-256"
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
        case .aegis256: AEGIS256.self
        }
    }
}

/// How new files are laid out: segment size and cipher.
struct ContentFormat: Sendable, Equatable {
    /// Plaintext bytes per segment.
    var segmentSize: Int
    var cipher: ContentCipher
}
