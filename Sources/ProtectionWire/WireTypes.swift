internal import NIOCore
public import ProtectionModel

/// How `open` treats an existing or missing file.
public enum WireOpenMode: UInt8, Sendable, Equatable {
    /// The file must exist.
    case existing = 0
    /// The file must not exist.
    case createNew = 1
    /// Open it, or create it.
    case openOrCreate = 2
}

/// The daemon's state as reported by `status` and `subscribe`.
public struct StatusReport: Sendable, Equatable {
    /// Lock state.
    public var state: LockState
    /// Whether a passcode is set.
    public var passcodeSet: Bool
    /// Consecutive failed unlock attempts.
    public var failedAttempts: UInt32
    /// Seconds until another unlock attempt is allowed.
    public var retryAfterSeconds: UInt64
    /// The configured grace period, in milliseconds.
    public var gracePeriodMilliseconds: UInt64
    /// Sequence number of the last event sent.
    public var eventSequence: UInt64
    /// End of the grace period (Unix milliseconds) while locking, else 0.
    public var lockDeadlineUnixMilliseconds: UInt64
    /// Whether the daemon's key memory is locked in RAM (never swapped).
    public var keyMemoryLocked: Bool
    /// The configured first-unlock timeout in milliseconds; 0 = off.
    public var firstUnlockTimeoutMilliseconds: UInt64
    /// Milliseconds until the first-unlock timeout passes; 0 while it does not run.
    public var firstUnlockRemainingMilliseconds: UInt64
    /// Whether a recovery key can reset the passcode (version 3).
    public var recoveryKeySet: Bool
    /// Why the daemon serves no files (a key bag it cannot open, an
    /// unreadable state directory), or nil. On the wire: a trailing string,
    /// present only when set (docs/PROTOCOL.md).
    public var fault: String?

    /// Makes a report.
    public init(state: LockState, passcodeSet: Bool, failedAttempts: UInt32, retryAfterSeconds: UInt64,
                gracePeriodMilliseconds: UInt64, eventSequence: UInt64, lockDeadlineUnixMilliseconds: UInt64,
                keyMemoryLocked: Bool, firstUnlockTimeoutMilliseconds: UInt64 = 0,
                firstUnlockRemainingMilliseconds: UInt64 = 0, recoveryKeySet: Bool = false, fault: String? = nil) {
        self.state = state
        self.passcodeSet = passcodeSet
        self.failedAttempts = failedAttempts
        self.retryAfterSeconds = retryAfterSeconds
        self.gracePeriodMilliseconds = gracePeriodMilliseconds
        self.eventSequence = eventSequence
        self.lockDeadlineUnixMilliseconds = lockDeadlineUnixMilliseconds
        self.keyMemoryLocked = keyMemoryLocked
        self.firstUnlockTimeoutMilliseconds = firstUnlockTimeoutMilliseconds
        self.firstUnlockRemainingMilliseconds = firstUnlockRemainingMilliseconds
        self.recoveryKeySet = recoveryKeySet
        self.fault = fault
    }

    func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(state.wireValue)
        buffer.writeInteger(UInt8(passcodeSet ? 1 : 0))
        buffer.writeInteger(failedAttempts, endianness: .big)
        buffer.writeInteger(retryAfterSeconds, endianness: .big)
        buffer.writeInteger(gracePeriodMilliseconds, endianness: .big)
        buffer.writeInteger(eventSequence, endianness: .big)
        buffer.writeInteger(lockDeadlineUnixMilliseconds, endianness: .big)
        buffer.writeInteger(UInt8(keyMemoryLocked ? 1 : 0))
        buffer.writeInteger(firstUnlockTimeoutMilliseconds, endianness: .big)
        buffer.writeInteger(firstUnlockRemainingMilliseconds, endianness: .big)
        buffer.writeInteger(UInt8(recoveryKeySet ? 1 : 0))
        if let fault { buffer.writeWireString(fault) }
    }

    static func decode(from buffer: inout ByteBuffer) throws -> StatusReport {
        StatusReport(state: try buffer.readWireLockState(), passcodeSet: try buffer.readWireBool("passcode set"),
                     failedAttempts: try buffer.readWireInteger("failed attempts"),
                     retryAfterSeconds: try buffer.readWireInteger("retry after"),
                     gracePeriodMilliseconds: try buffer.readWireInteger("grace period"),
                     eventSequence: try buffer.readWireInteger("sequence"),
                     lockDeadlineUnixMilliseconds: try buffer.readWireInteger("deadline"),
                     keyMemoryLocked: try buffer.readWireBool("key memory locked"),
                     firstUnlockTimeoutMilliseconds: try buffer.readWireInteger("first-unlock timeout"),
                     firstUnlockRemainingMilliseconds: try buffer.readWireInteger("first-unlock timeout remaining"),
                     recoveryKeySet: try buffer.readWireBool("recovery key set"),
                     fault: buffer.readableBytes > 0 ? try buffer.readWireString("fault") : nil)
    }
}

/// A file's name, class, size and modification time.
public struct WireAttributes: Sendable, Equatable {
    /// The name within the caller's namespace.
    public var name: String
    /// Its protection class.
    public var protection: ProtectionClass
    /// Plaintext size in bytes.
    public var size: UInt64
    /// Modification time, seconds since the Unix epoch.
    public var modificationTime: Int64

    /// Makes attributes.
    public init(name: String, protection: ProtectionClass, size: UInt64, modificationTime: Int64) {
        self.name = name
        self.protection = protection
        self.size = size
        self.modificationTime = modificationTime
    }

    func encode(into buffer: inout ByteBuffer) {
        buffer.writeWireString(name)
        buffer.writeInteger(protection.rawValue)
        buffer.writeInteger(size, endianness: .big)
        buffer.writeInteger(modificationTime, endianness: .big)
    }

    static func decode(from buffer: inout ByteBuffer) throws -> WireAttributes {
        WireAttributes(name: try buffer.readWireString("name"), protection: try buffer.readWireProtection(),
                       size: try buffer.readWireInteger("size"), modificationTime: try buffer.readWireInteger("mtime"))
    }
}

/// A lock-state notification.
public struct WireEvent: Sendable, Equatable {
    /// What happened.
    public enum Kind: UInt8, Sendable, Equatable {
        /// `protectedDataWillBecomeUnavailable`.
        case willBecomeUnavailable = 1
        /// `protectedDataDidBecomeUnavailable`.
        case didBecomeUnavailable = 2
        /// `protectedDataDidBecomeAvailable`.
        case didBecomeAvailable = 3
    }

    /// What happened.
    public var kind: Kind
    /// Increases by one per event within a daemon run.
    public var sequence: UInt64
    /// The state after the event.
    public var state: LockState
    /// For `willBecomeUnavailable`: the deadline in Unix milliseconds; else 0.
    public var deadlineUnixMilliseconds: UInt64
    /// For `didBecomeAvailable`: the first unlock since the daemon started
    /// or returned to `beforeFirstUnlock`.
    public var firstUnlock: Bool
    /// For the two unavailable events: why; nil for `didBecomeAvailable`.
    public var reason: LockReason?

    /// Makes an event.
    public init(kind: Kind, sequence: UInt64, state: LockState, deadlineUnixMilliseconds: UInt64 = 0,
                firstUnlock: Bool = false, reason: LockReason? = nil) {
        self.kind = kind
        self.sequence = sequence
        self.state = state
        self.deadlineUnixMilliseconds = deadlineUnixMilliseconds
        self.firstUnlock = firstUnlock
        self.reason = reason
    }
}

/// Error codes on the wire. Unknown codes must be treated as `internalError`.
public enum WireErrorCode: UInt16, Sendable, Equatable, CaseIterable {
    case protectedDataUnavailable = 1
    case notFound = 2
    case alreadyExists = 3
    case invalidName = 4
    case integrityFailure = 5
    case wrongPasscode = 6
    case rateLimited = 7
    case erasedAfterFailedAttempts = 8
    case noPasscodeSet = 9
    case invalidArgument = 10
    case handleClosed = 11
    case keyBagCorrupt = 12
    case ioFailure = 13
    case permissionDenied = 14
    case protocolError = 15
    case unsupportedVersion = 16
    case tooManyHandles = 17
    case tooManyConnections = 18
    case internalError = 19
    case cipherUnavailable = 20
    case quotaExceeded = 21
    case fileChanged = 22
}

/// An error response.
public struct WireError: Error, Sendable, Equatable {
    /// What went wrong.
    public var code: WireErrorCode
    /// A sentence for a person.
    public var message: String
    /// For `rateLimited` (and `wrongPasscode` with a delay): seconds to wait.
    public var retryAfterSeconds: UInt64?

    /// Makes an error.
    public init(_ code: WireErrorCode, _ message: String, retryAfterSeconds: UInt64? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }
}
