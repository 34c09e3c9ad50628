/// Every failure ProtectionCore reports: a code a program can switch on and
/// a sentence a person can act on. Messages never contain keys, passcodes
/// or file content.
public struct ProtectionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Equatable, Hashable, CaseIterable {
        /// The file's class key is not in memory in the current lock state.
        case protectedDataUnavailable
        /// No file by that name in the caller's namespace.
        case notFound
        /// A file by that name exists and the operation wanted a new one.
        case alreadyExists
        /// The name breaks the naming rules (see `FileName`).
        case invalidName
        /// Stored data failed authentication: tampered, truncated or corrupt.
        case integrityFailure
        /// The passcode did not unlock the key bag.
        case wrongPasscode
        /// Too many failed attempts; see `retryAfterSeconds`.
        case rateLimited
        /// Too many failed attempts with erase-after-N configured: every
        /// key was destroyed.
        case erasedAfterFailedAttempts
        /// The operation needs a passcode and none is set (e.g. lock).
        case noPasscodeSet
        /// An argument is out of range (offset, length, segment size...).
        case invalidArgument
        /// The handle was closed, or invalidated by a lock.
        case handleClosed
        /// The key bag or device secret on disk is unusable.
        case keyBagCorrupt
        /// The operating system refused an I/O operation (disk full...).
        case ioFailure
        /// The file's content cipher cannot run here (AES-256-GCM or
        /// AEGIS-256 on a CPU without AES-NI, AEGIS-256 with a libsodium
        /// older than 1.0.19); the file itself is intact.
        case cipherUnavailable
        /// A storage quota of the namespace (`StorageQuota`) would be
        /// passed; nothing was changed.
        case quotaExceeded
        /// A handle wrote the file in place while a read of several chunks
        /// was under way; the read stopped rather than mix two versions.
        case fileChanged
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for a person.
    public let message: String
    /// For `rateLimited`: whole seconds until the next attempt is allowed.
    public let retryAfterSeconds: Int64?
    /// The `errno` of the failed system call this error reports
    /// (`Posix.error`), else nil; not part of equality.
    let systemErrno: Int32?

    /// Makes an error.
    public init(_ code: Code, _ message: String, retryAfterSeconds: Int64? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        systemErrno = nil
    }

    /// The error for a system call that failed with `systemErrno`.
    init(_ code: Code, _ message: String, systemErrno: Int32) {
        self.code = code
        self.message = message
        retryAfterSeconds = nil
        self.systemErrno = systemErrno
    }

    public static func == (lhs: ProtectionError, rhs: ProtectionError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.retryAfterSeconds == rhs.retryAfterSeconds
    }

    public var description: String { message }
}

extension ProtectionError {
    static func unavailable(_ protection: ProtectionClass) -> ProtectionError {
        ProtectionError(.protectedDataUnavailable,
                        "protected data of class \(protection) is unavailable until the device is unlocked")
    }

    /// A handle on `name` that its owner closed.
    static func handleClosed(_ name: FileName) -> ProtectionError {
        ProtectionError(.handleClosed, "the handle on \(name) is closed")
    }

    /// A handle (`subject`) whose key a lock, erase or shutdown wiped.
    static func invalidated(_ subject: String) -> ProtectionError {
        ProtectionError(.protectedDataUnavailable,
                        "\(subject) was invalidated by a lock, an erase or shutdown; reopen the file (after unlocking, if locked)")
    }

    /// A file a lock or erase closed while a caller was opening it.
    static func closedWhileOpening(_ name: FileName) -> ProtectionError {
        ProtectionError(.protectedDataUnavailable, "\(name) was closed by a lock or erase while it was being opened; try again")
    }

    /// `cipher` cannot run here (this CPU or the linked libsodium lacks
    /// it); `subject` is what needs it, and `advice` what to do instead.
    static func cipherUnavailable(_ cipher: ContentCipher, for subject: String, _ advice: String) -> ProtectionError {
        let missing = cipher.unmetRequirement ?? "what this machine lacks"
        return ProtectionError(.cipherUnavailable, "\(subject) \(cipher) needs \(missing); \(advice)")
    }

    static func integrity(_ detail: String) -> ProtectionError {
        ProtectionError(.integrityFailure, "integrity check failed: \(detail)")
    }
}
