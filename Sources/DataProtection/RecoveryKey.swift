/// A recovery key: 256 random bits that set a new passcode when the
/// passcode is forgotten (`DataProtectionClient.createRecoveryKey` makes
/// one, `resetPasscode(recoveryKey:newPasscode:)` uses it). `text` is the
/// form a person copies by hand; `description` never shows the key, so it
/// does not end up in a log by accident.
public struct RecoveryKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable {
    /// The number of bytes in a recovery key.
    public static let byteCount = RecoveryKeyText.byteCount

    /// The key's bytes.
    public let bytes: [UInt8]

    /// A key from its `byteCount` bytes; other lengths are `invalidArgument`.
    public init(bytes: [UInt8]) throws(DataProtectionError) {
        guard bytes.count == Self.byteCount else {
            throw .invalidArgument("a recovery key has \(Self.byteCount) bytes, not \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// A key from its text: 8 groups of 8 characters (`text`), in any case,
    /// with or without spaces and dashes; `0` reads as `O` and `1` as `I`.
    /// A typo is `invalidArgument` naming the group it is in.
    public init(text: String) throws(DataProtectionError) {
        bytes = try RecoveryKeyText.decode(text)
    }

    /// The key as a person writes it down: 8 groups of 8 characters
    /// (RFC 4648 base32, the last of each a check character), joined by
    /// dashes.
    public var text: String { RecoveryKeyText.encode(bytes) }

    /// Never the key.
    public var description: String { "RecoveryKey(redacted)" }
    /// Never the key.
    public var debugDescription: String { description }
    /// No children, so `dump` does not show the key either.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
