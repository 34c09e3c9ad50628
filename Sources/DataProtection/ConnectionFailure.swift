internal import NIOCore

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// Why a connection to protd failed, in words a person can act on: the
/// system's reason (no NIO function names), and what to do about it.
enum ConnectionFailure {
    /// The error for a failed connect to the socket at `path`.
    static func connecting(to path: String, _ error: any Error) -> DataProtectionError {
        switch (error as? IOError)?.errnoCode {
        case ENOENT:
            .daemonUnavailable("there is no socket at \(path); start protd or its socket unit, "
                               + "or point --socket or PROTD_SOCKET at the socket it serves")
        case ECONNREFUSED:
            .daemonUnavailable("nothing listens at \(path); start protd or its socket unit")
        case EACCES, EPERM:
            .daemonUnavailable("permission denied on \(path); join the group that owns the socket, "
                               + "protd unless configured otherwise, or run as root")
        default:
            .daemonUnavailable("cannot connect to \(path): \(reason(error))")
        }
    }

    /// The system's reason for `error` (`Connection refused`), or a plain
    /// description of NIO's own channel errors.
    static func reason(_ error: any Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        if let channel = error as? ChannelError {
            switch channel {
            case .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed, .eof: return "the connection is closed"
            case .connectTimeout: return "the connection was not accepted in time"
            default: break
            }
        }
        if error is NIOAsyncWriterError { return "the connection is closed" }
        return "an unexpected error"
    }
}
