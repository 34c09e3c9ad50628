internal import ProtectionWire

/// Every failure the DataProtection library reports: what happened, in a
/// sentence that also says what to do. Switch on the case, or compare
/// `code` when the message does not matter.
public enum DataProtectionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file's protection class is locked away in the current lock state.
    case protectedDataUnavailable(String)
    /// No file by that name exists in this user's namespace.
    case notFound(String)
    /// A file by that name exists and the operation needed a new one.
    case alreadyExists(String)
    /// The name breaks the naming rules (empty, absolute, `..`, NUL, too long).
    case invalidName(String)
    /// Stored data failed authentication: tampered with, truncated or corrupt.
    case integrityFailure(String)
    /// The passcode or recovery key is wrong; `retryAfter` is set when the next attempt must wait.
    case wrongPasscode(String, retryAfter: Duration?)
    /// Too many failed attempts: the next unlock is allowed after `retryAfter`.
    case rateLimited(retryAfter: Duration, message: String)
    /// Too many failed attempts with erase-after-N configured: every key was destroyed.
    case erasedAfterFailedAttempts(String)
    /// The operation needs a passcode and none is set.
    case noPasscodeSet(String)
    /// An argument is out of range (an offset, a length, a grace period).
    case invalidArgument(String)
    /// The handle is not open: this client closed it, or the daemon no
    /// longer knows it. (Once its connection ended, its calls fail as the
    /// connection's do.)
    case handleClosed(String)
    /// The daemon's key bag or device secret on disk is unusable.
    case keyBagCorrupt(String)
    /// The daemon's operating system refused it something: an I/O
    /// operation (disk full...) or memory (see the message).
    case ioFailure(String)
    /// The file was written with a content cipher this daemon cannot run
    /// (AES-256-GCM or AEGIS-256 without AES-NI, AEGIS-256 with a libsodium
    /// older than 1.0.19); the file is intact.
    case cipherUnavailable(String)
    /// A storage quota of this user (bytes or files) would be passed; the
    /// files keep what they had.
    case quotaExceeded(String)
    /// A handle wrote the file in place while it was being read in
    /// several chunks; the read stopped rather than mix two versions.
    /// Read it again (`ProtectedFile.read()` does, a few times).
    case fileChanged(String)
    /// The caller is not allowed to do this (lock, passwd and erase need privileges).
    case permissionDenied(String)
    /// One side sent something the other could not understand.
    case protocolError(String)
    /// The daemon does not speak this library's protocol version.
    case unsupportedVersion(String)
    /// This connection, or this user over all its connections, holds too
    /// many handles and writes in progress, or too many event subscriptions.
    case tooManyHandles(String)
    /// The daemon has too many connections.
    case tooManyConnections(String)
    /// The daemon failed in a way it did not expect.
    case internalError(String)
    /// The daemon cannot be reached, or the connection to it was closed.
    case daemonUnavailable(String)
    /// This client was closed (`close()`) or released; connect again.
    case clientClosed(String)
    /// The daemon did not answer, or took no data, within the client's
    /// `requestTimeout`.
    case timedOut(String)
    /// The calling task was cancelled before the daemon answered.
    case cancelled

    /// The kind of failure without its details, for comparisons.
    public enum Code: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// See `DataProtectionError.protectedDataUnavailable`.
        case protectedDataUnavailable
        /// See `DataProtectionError.notFound`.
        case notFound
        /// See `DataProtectionError.alreadyExists`.
        case alreadyExists
        /// See `DataProtectionError.invalidName`.
        case invalidName
        /// See `DataProtectionError.integrityFailure`.
        case integrityFailure
        /// See `DataProtectionError.wrongPasscode`.
        case wrongPasscode
        /// See `DataProtectionError.rateLimited`.
        case rateLimited
        /// See `DataProtectionError.erasedAfterFailedAttempts`.
        case erasedAfterFailedAttempts
        /// See `DataProtectionError.noPasscodeSet`.
        case noPasscodeSet
        /// See `DataProtectionError.invalidArgument`.
        case invalidArgument
        /// See `DataProtectionError.handleClosed`.
        case handleClosed
        /// See `DataProtectionError.keyBagCorrupt`.
        case keyBagCorrupt
        /// See `DataProtectionError.ioFailure`.
        case ioFailure
        /// See `DataProtectionError.cipherUnavailable`.
        case cipherUnavailable
        /// See `DataProtectionError.quotaExceeded`.
        case quotaExceeded
        /// See `DataProtectionError.fileChanged`.
        case fileChanged
        /// See `DataProtectionError.permissionDenied`.
        case permissionDenied
        /// See `DataProtectionError.protocolError`.
        case protocolError
        /// See `DataProtectionError.unsupportedVersion`.
        case unsupportedVersion
        /// See `DataProtectionError.tooManyHandles`.
        case tooManyHandles
        /// See `DataProtectionError.tooManyConnections`.
        case tooManyConnections
        /// See `DataProtectionError.internalError`.
        case internalError
        /// See `DataProtectionError.daemonUnavailable`.
        case daemonUnavailable
        /// See `DataProtectionError.clientClosed`.
        case clientClosed
        /// See `DataProtectionError.timedOut`.
        case timedOut
        /// See `DataProtectionError.cancelled`.
        case cancelled

        /// The case name, e.g. `protectedDataUnavailable`.
        public var description: String { rawValue }
    }

    /// The kind of failure, e.g. `.protectedDataUnavailable`.
    public var code: Code {
        switch self {
        case .protectedDataUnavailable: .protectedDataUnavailable
        case .notFound: .notFound
        case .alreadyExists: .alreadyExists
        case .invalidName: .invalidName
        case .integrityFailure: .integrityFailure
        case .wrongPasscode: .wrongPasscode
        case .rateLimited: .rateLimited
        case .erasedAfterFailedAttempts: .erasedAfterFailedAttempts
        case .noPasscodeSet: .noPasscodeSet
        case .invalidArgument: .invalidArgument
        case .handleClosed: .handleClosed
        case .keyBagCorrupt: .keyBagCorrupt
        case .ioFailure: .ioFailure
        case .cipherUnavailable: .cipherUnavailable
        case .quotaExceeded: .quotaExceeded
        case .fileChanged: .fileChanged
        case .permissionDenied: .permissionDenied
        case .protocolError: .protocolError
        case .unsupportedVersion: .unsupportedVersion
        case .tooManyHandles: .tooManyHandles
        case .tooManyConnections: .tooManyConnections
        case .internalError: .internalError
        case .daemonUnavailable: .daemonUnavailable
        case .clientClosed: .clientClosed
        case .timedOut: .timedOut
        case .cancelled: .cancelled
        }
    }

    /// The detail the daemon (or this library) gave; empty for `cancelled`.
    public var message: String {
        switch self {
        case .protectedDataUnavailable(let message), .notFound(let message), .alreadyExists(let message),
             .invalidName(let message), .integrityFailure(let message), .wrongPasscode(let message, _),
             .rateLimited(_, let message), .erasedAfterFailedAttempts(let message), .noPasscodeSet(let message),
             .invalidArgument(let message), .handleClosed(let message), .keyBagCorrupt(let message),
             .ioFailure(let message), .cipherUnavailable(let message), .quotaExceeded(let message),
             .fileChanged(let message),
             .permissionDenied(let message),
             .protocolError(let message), .unsupportedVersion(let message), .tooManyHandles(let message),
             .tooManyConnections(let message), .internalError(let message), .daemonUnavailable(let message),
             .timedOut(let message), .clientClosed(let message):
            message
        case .cancelled:
            ""
        }
    }

    /// What happened and what to do, followed by the detail in parentheses.
    public var description: String {
        let detail = message.isEmpty ? "" : " (\(message))"
        return advice + detail
    }

    private var advice: String {
        switch self {
        case .protectedDataUnavailable:
            "Protected data is unavailable until the device is unlocked; unlock it and try again."
        case .notFound:
            "No file by that name exists; check the name, or list the files to see what exists."
        case .alreadyExists:
            "A file by that name already exists; open it instead, or choose another name."
        case .invalidName:
            "The file name is not allowed; use a relative path without empty components, '..' or NUL bytes."
        case .integrityFailure:
            "The stored data failed its integrity check and was not returned; restore the file from a backup."
        case .wrongPasscode(_, let retryAfter):
            if let retryAfter {
                "The passcode or recovery key is wrong; try again after \(Self.format(retryAfter))."
            } else {
                "The passcode or recovery key is wrong; check it and try again."
            }
        case .rateLimited(let retryAfter, _):
            "Too many failed unlock attempts; wait \(Self.format(retryAfter)) before trying again."
        case .erasedAfterFailedAttempts:
            "Too many failed unlock attempts erased every key; the protected files cannot be recovered."
        case .noPasscodeSet:
            "No passcode is set, so there is nothing to lock or check; set a passcode first."
        case .invalidArgument:
            "An argument is out of range; check offsets, lengths and durations."
        case .handleClosed:
            "The file handle is not open: it was closed; open the file again."
        case .keyBagCorrupt:
            "The daemon's key bag is unusable; an administrator must check protd's state directory."
        case .ioFailure:
            "The daemon's system refused it storage or memory; an administrator should check the disk and the daemon's memory limits."
        case .cipherUnavailable:
            "The file was written with a cipher this daemon cannot run; it is intact: read it with a protd whose CPU or libsodium has what the message names."
        case .quotaExceeded:
            "This user's storage quota is used up and nothing was changed; delete files, or ask an administrator for a larger quota."
        case .fileChanged:
            "The file was changed through a handle while it was being read; read it again."
        case .permissionDenied:
            "This user is not allowed to do that; ask an administrator."
        case .protocolError:
            "The client and the daemon misunderstood each other; report this as a bug."
        case .unsupportedVersion:
            "The daemon does not speak this library's protocol version; install matching versions of protd and the library."
        case .tooManyHandles:
            "Too many file handles, writes or event subscriptions are open on this connection or for this user; close some and try again."
        case .tooManyConnections:
            "The daemon has too many connections; try again later."
        case .internalError:
            "The daemon failed unexpectedly; try again, and report it if it persists."
        case .daemonUnavailable:
            "The protd daemon cannot be reached."
        case .clientClosed:
            "This client was closed; connect again to make new requests."
        case .timedOut:
            "The daemon did not respond in time; check that it is running and not overloaded, or allow a longer request timeout."
        case .cancelled:
            "The operation was cancelled before the daemon answered; a request already sent may still have been carried out."
        }
    }

    /// `1 second`, `45 seconds`, `1 minute`, `15 minutes`, `1 hour`.
    static func format(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        let (amount, unit): (Int64, String) = switch seconds {
        case 3600... where seconds % 3600 == 0: (seconds / 3600, "hour")
        case 60... where seconds % 60 == 0: (seconds / 60, "minute")
        default: (seconds, "second")
        }
        return amount == 1 ? "1 \(unit)" : "\(amount) \(unit)s"
    }
}

extension DataProtectionError {
    /// The library error for an error answer from the daemon.
    init(_ wire: WireError) {
        let message = wire.message
        let retryAfter = wire.retryAfterSeconds.map { Duration.seconds(Int64(clamping: $0)) }
        switch wire.code {
        case .protectedDataUnavailable: self = .protectedDataUnavailable(message)
        case .notFound: self = .notFound(message)
        case .alreadyExists: self = .alreadyExists(message)
        case .invalidName: self = .invalidName(message)
        case .integrityFailure: self = .integrityFailure(message)
        case .wrongPasscode: self = .wrongPasscode(message, retryAfter: retryAfter)
        case .rateLimited: self = .rateLimited(retryAfter: retryAfter ?? .zero, message: message)
        case .erasedAfterFailedAttempts: self = .erasedAfterFailedAttempts(message)
        case .noPasscodeSet: self = .noPasscodeSet(message)
        case .invalidArgument: self = .invalidArgument(message)
        case .handleClosed: self = .handleClosed(message)
        case .keyBagCorrupt: self = .keyBagCorrupt(message)
        case .ioFailure: self = .ioFailure(message)
        case .cipherUnavailable: self = .cipherUnavailable(message)
        case .quotaExceeded: self = .quotaExceeded(message)
        case .fileChanged: self = .fileChanged(message)
        case .permissionDenied: self = .permissionDenied(message)
        case .protocolError: self = .protocolError(message)
        case .unsupportedVersion: self = .unsupportedVersion(message)
        case .tooManyHandles: self = .tooManyHandles(message)
        case .tooManyConnections: self = .tooManyConnections(message)
        case .internalError: self = .internalError(message)
        }
    }

    /// The error for an answer of the wrong kind.
    static func unexpected(_ response: Response, to request: String) -> DataProtectionError {
        if case .error(let wire) = response { return DataProtectionError(wire) }
        return .protocolError("protd answered \(request) with an unexpected \(response.type) message")
    }
}
