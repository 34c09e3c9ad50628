internal import ProtectionCore
internal import ProtectionVersion
internal import Sodium

/// What `protd --version` prints: the release, the libsodium it links and
/// the cipher new files get on this machine by default, e.g.
/// `protd 1.0.0 (libsodium 1.0.18, new files: aes-256-gcm)`.
public enum VersionLine {
    /// The line for this build on this machine.
    public static var current: String {
        "protd \(ProtdVersion.current) (libsodium \(SodiumRuntime.version), new files: \(ContentCipher.preferred))"
    }
}
