internal import Foundation
internal import Glibc

/// A datagram socket standing in for systemd's `NOTIFY_SOCKET`, so tests
/// can see what the daemon tells its service manager.
public final class NotifySocket: @unchecked Sendable {
    /// The socket's path, to pass as `NOTIFY_SOCKET`.
    public let path: String
    private let fd: Int32

    /// Binds a datagram socket at `path`.
    public init(path: String) throws {
        self.path = path
        guard let fd = unixSocket(type: Int32(SOCK_DGRAM.rawValue), path: path, bind) else {
            throw POSIXError(.EADDRINUSE)
        }
        self.fd = fd
    }

    /// The next datagram as text, or nil after `timeout` seconds.
    public func receive(timeout: Int = 10) -> String? {
        var timeoutValue = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeoutValue, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    deinit {
        close(fd)
        unlink(path)
    }
}
