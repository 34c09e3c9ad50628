public import Logging
internal import ProtectionCore
internal import ProtectionWire
internal import Sodium

/// Why protd serves no files: its state could not be opened at start (a
/// key bag that fails authentication, a device secret that does not match
/// it, an unreadable state directory), or its key memory cannot be locked
/// while `memory.require-locked` is set. Restarting cannot fix that, and
/// systemd's restarts would end in `start-limit-hit` with the socket
/// removed; so protd stays up on its socket instead: `status` reports the
/// fault, every other request fails with an error naming it, and it is
/// logged once. Fix the cause, then restart protd.
public struct DaemonFault: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for a person; never a secret.
    public let reason: String
    /// The error code of the requests refused.
    let code: WireErrorCode

    private init(code: WireErrorCode, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// `memory.require-locked` is set and the kernel refuses to lock key memory.
    static let keyMemoryNotLocked = DaemonFault(
        code: .ioFailure,
        reason: "key memory cannot be locked in RAM and memory.require-locked is set; give protd CAP_IPC_LOCK "
            + "or a higher LimitMEMLOCK, or turn memory.require-locked off")

    /// The fault for `error`, thrown while opening the state in `stateDirectory`.
    public init(openingStateFailedWith error: any Error, in stateDirectory: String) {
        switch error {
        case let error as ProtectionError where error.code == .keyBagCorrupt:
            code = .keyBagCorrupt
            reason = error.message
        case let error as ProtectionError:
            code = .ioFailure
            reason = "cannot open the state in \(stateDirectory): \(error.message)"
        default:
            code = .ioFailure
            reason = "cannot open the state in \(stateDirectory): \(error)"
        }
    }

    public var description: String { reason }

    /// The answer to every request but `hello` and `status`.
    var refusal: WireError {
        WireError(code, "protd is in a fault state and serves no files: \(reason); see journalctl -u protd")
    }
}

/// What connections share while the daemon is in a fault state.
public struct FaultContext: Sendable {
    /// Why no files are served.
    public let fault: DaemonFault
    /// Who is an administrator (for the connection slots kept for them).
    public let authorization: Authorization
    /// Largest frame accepted from a client.
    public let maximumFrameLength: Int
    /// The configured grace period, reported by `status`.
    public let gracePeriod: Duration
    /// The daemon's logger.
    public let logger: Logger

    /// Bundles the shared parts.
    public init(fault: DaemonFault, authorization: Authorization, maximumFrameLength: Int, gracePeriod: Duration,
                logger: Logger) {
        self.fault = fault
        self.authorization = authorization
        self.maximumFrameLength = maximumFrameLength
        self.gracePeriod = gracePeriod
        self.logger = logger
    }

    /// `status` in a fault state: nothing is available, nothing is known
    /// about the passcode, and `fault` says why.
    var statusReport: StatusReport {
        StatusReport(state: .beforeFirstUnlock, passcodeSet: false, failedAttempts: 0, retryAfterSeconds: 0,
                     gracePeriodMilliseconds: UInt64(max(0, gracePeriod.milliseconds)), eventSequence: 0,
                     lockDeadlineUnixMilliseconds: 0, keyMemoryLocked: MemoryLocking.isKeyMemoryLocked,
                     fault: fault.reason)
    }
}
