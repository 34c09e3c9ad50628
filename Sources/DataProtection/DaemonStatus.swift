public import ProtectionModel
internal import ProtectionWire

/// The daemon's lock state and failed-attempt record, as `status()` and
/// `subscribe()` report them.
public struct DaemonStatus: Sendable, Equatable {
    /// The lock state.
    public var state: LockState
    /// Whether a passcode is set. Without one every class behaves as `.none`.
    public var passcodeSet: Bool
    /// Consecutive failed unlock attempts.
    public var failedAttempts: Int
    /// How long until another unlock attempt is allowed; nil when one is allowed now.
    public var retryAfter: Duration?
    /// The grace period a lock waits for acknowledgements by default.
    public var gracePeriod: Duration
    /// The sequence number of the last event the daemon sent; events after
    /// a resynchronisation have larger numbers.
    public var eventSequence: UInt64
    /// While `locking`: when the grace period ends, in Unix milliseconds; else nil.
    public var lockDeadlineUnixMilliseconds: UInt64?
    /// Whether the daemon's key memory is locked in RAM. False means keys
    /// could be swapped to disk: protd lacks CAP_IPC_LOCK or enough
    /// LimitMEMLOCK (its journal says so at start).
    public var keyMemoryLocked: Bool
    /// How long after the last unlock the daemon returns to
    /// `beforeFirstUnlock` (class C keys wiped too); nil when off.
    public var firstUnlockTimeout: Duration?
    /// How long until it does; nil while that timeout does not run (off,
    /// no passcode, or already `beforeFirstUnlock`).
    public var firstUnlockTimeoutRemaining: Duration?
    /// Whether a recovery key can set a new passcode (`resetPasscode`).
    public var recoveryKeySet: Bool
    /// Why the daemon serves no files, when it is in a fault state (a key
    /// bag it cannot open, an unreadable state directory); else nil. Every
    /// request but `status` then fails with an error that says the same.
    public var fault: String?

    /// Makes a status.
    public init(state: LockState, passcodeSet: Bool, failedAttempts: Int, retryAfter: Duration?,
                gracePeriod: Duration, eventSequence: UInt64, lockDeadlineUnixMilliseconds: UInt64?,
                keyMemoryLocked: Bool, firstUnlockTimeout: Duration? = nil,
                firstUnlockTimeoutRemaining: Duration? = nil, recoveryKeySet: Bool = false, fault: String? = nil) {
        self.state = state
        self.passcodeSet = passcodeSet
        self.failedAttempts = failedAttempts
        self.retryAfter = retryAfter
        self.gracePeriod = gracePeriod
        self.eventSequence = eventSequence
        self.lockDeadlineUnixMilliseconds = lockDeadlineUnixMilliseconds
        self.keyMemoryLocked = keyMemoryLocked
        self.firstUnlockTimeout = firstUnlockTimeout
        self.firstUnlockTimeoutRemaining = firstUnlockTimeoutRemaining
        self.recoveryKeySet = recoveryKeySet
        self.fault = fault
    }

    /// True when files of every class can be read: the state is `unlocked`
    /// or `locking`, or no passcode is set; never in a fault state.
    public var isProtectedDataAvailable: Bool {
        fault == nil && (!passcodeSet || state == .unlocked || state == .locking)
    }
}

extension DaemonStatus {
    init(_ report: StatusReport) {
        self.init(state: report.state, passcodeSet: report.passcodeSet, failedAttempts: Int(report.failedAttempts),
                  retryAfter: report.retryAfterSeconds == 0 ? nil : .seconds(Int64(clamping: report.retryAfterSeconds)),
                  gracePeriod: .milliseconds(Int64(clamping: report.gracePeriodMilliseconds)),
                  eventSequence: report.eventSequence,
                  lockDeadlineUnixMilliseconds: report.lockDeadlineUnixMilliseconds == 0
                      ? nil : report.lockDeadlineUnixMilliseconds,
                  keyMemoryLocked: report.keyMemoryLocked,
                  firstUnlockTimeout: Self.duration(milliseconds: report.firstUnlockTimeoutMilliseconds),
                  firstUnlockTimeoutRemaining: Self.duration(milliseconds: report.firstUnlockRemainingMilliseconds),
                  recoveryKeySet: report.recoveryKeySet, fault: report.fault)
    }

    /// A duration on the wire, where 0 means none.
    private static func duration(milliseconds: UInt64) -> Duration? {
        milliseconds == 0 ? nil : .milliseconds(Int64(clamping: milliseconds))
    }
}
