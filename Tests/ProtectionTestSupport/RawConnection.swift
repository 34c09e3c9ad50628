internal import Foundation
internal import Glibc

/// A bare Unix-socket connection for sending the daemon malformed or
/// hand-made frames.
public final class RawConnection: @unchecked Sendable {
    /// The socket, for poll(2).
    public let fd: Int32

    /// Connects to `path`.
    public convenience init(path: String) throws {
        guard let fd = unixSocket(type: Int32(SOCK_STREAM.rawValue), path: path, connect) else {
            throw POSIXError(.ECONNREFUSED)
        }
        self.init(fd: fd)
    }

    /// Takes over a connected socket, e.g. one a test's own listener
    /// accepted; reads give up after `receiveTimeoutSeconds`.
    public init(fd: Int32, receiveTimeoutSeconds: Int = 5) {
        self.fd = fd
        var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends raw bytes.
    public func sendRaw(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXError(.EPIPE) }
            sent += n
        }
    }

    /// Sends one well-formed frame.
    public func send(type: UInt8, id: UInt32, body: [UInt8]) throws {
        var frame: [UInt8] = []
        let length = UInt32(5 + body.count)
        frame += withUnsafeBytes(of: length.bigEndian, Array.init)
        frame.append(type)
        frame += withUnsafeBytes(of: id.bigEndian, Array.init)
        try sendRaw(frame + body)
    }

    /// Sends hello (version 3) and reads the answer frame.
    public func handshake() throws {
        try send(type: 0x01, id: 1, body: [0, 3, 0, 3, 0, 3] + Array("raw".utf8))
        guard let answer = try readFrame(), answer.type == 0x81 else { throw POSIXError(.EPROTO) }
    }

    /// Reads one frame (type, id, body), or nil at end of stream.
    public func readFrame() throws -> (type: UInt8, id: UInt32, body: [UInt8])? {
        guard let header = try readExactly(4) else { return nil }
        let length = Int(header.reduce(0) { ($0 << 8) | UInt32($1) })
        guard let rest = try readExactly(length), rest.count >= 5 else { return nil }
        let id = rest[1..<5].reduce(0) { ($0 << 8) | UInt32($1) }
        return (rest[0], id, Array(rest[5...]))
    }

    /// Reads until end of stream; true when the daemon closed the connection.
    /// With `orReset`, a reset counts as closed too (the daemon closed it
    /// before reading all that was sent).
    public func readsEndOfStream(orReset: Bool = false) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return true }
            if n < 0 { return orReset && errno == ECONNRESET }
        }
    }

    private func readExactly(_ count: Int) throws -> [UInt8]? {
        var result = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = result.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + done, count - done, 0) }
            if n == 0 { return nil }
            if n < 0 { throw POSIXError(.ETIMEDOUT) }
            done += n
        }
        return result
    }

    /// Closes the socket.
    public func close() { Glibc.close(fd) }
}
