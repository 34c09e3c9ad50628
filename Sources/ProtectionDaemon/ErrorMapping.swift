internal import ProtectionCore
internal import ProtectionWire
internal import Sodium

extension WireError {
    /// The answer for any error thrown while serving a request. Errors we do
    /// not know are reported generically, so no internal detail leaks.
    init(serving error: any Error) {
        switch error {
        case let error as WireError:
            self = error
        case let error as ProtectionError:
            self.init(WireErrorCode(error.code), error.message,
                      retryAfterSeconds: error.retryAfterSeconds.map { UInt64(max(0, $0)) })
        case let violation as ProtocolViolation:
            self.init(.protocolError, violation.message)
        case let error as SodiumError where error.code == .memoryNotLocked:
            self.init(.ioFailure, error.message)
        default:
            self.init(.internalError, "the daemon could not complete the request; see its log")
        }
    }

    static func permissionDenied(_ what: String) -> WireError {
        WireError(.permissionDenied, "permission denied: \(what)")
    }
}

extension WireErrorCode {
    /// The wire code for a ProtectionCore error code.
    init(_ code: ProtectionError.Code) {
        switch code {
        case .protectedDataUnavailable: self = .protectedDataUnavailable
        case .notFound: self = .notFound
        case .alreadyExists: self = .alreadyExists
        case .invalidName: self = .invalidName
        case .integrityFailure: self = .integrityFailure
        case .wrongPasscode: self = .wrongPasscode
        case .rateLimited: self = .rateLimited
        case .erasedAfterFailedAttempts: self = .erasedAfterFailedAttempts
        case .noPasscodeSet: self = .noPasscodeSet
        case .invalidArgument: self = .invalidArgument
        case .handleClosed: self = .handleClosed
        case .keyBagCorrupt: self = .keyBagCorrupt
        case .ioFailure: self = .ioFailure
        case .cipherUnavailable: self = .cipherUnavailable
        case .quotaExceeded: self = .quotaExceeded
        case .fileChanged: self = .fileChanged
        }
    }
}
