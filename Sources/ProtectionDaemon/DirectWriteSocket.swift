internal import CPeerCredentials
internal import Glibc
internal import NIOCore
internal import Synchronization

/// A connection's socket, read by a direct write itself while NIO does not
/// read it (`autoRead` off): a duplicate of the channel's descriptor, found
/// by its `SO_COOKIE` (NIO has no public way to give a channel's
/// descriptor; a duplicate shares the socket, and its own number cannot be
/// reused under it). Closing the channel shuts the socket down, which
/// wakes a read waiting on it.
final class DirectWriteSocket: Sendable {
    let fd: Int32
    /// Whether `fd` is closed; guards the shutdown from the close hook.
    private let closed = Mutex(false)

    private init(fd: Int32) { self.fd = fd }

    /// Stops NIO reading `channel` and takes its socket. NIO reads again
    /// once `resume(_:)` is called.
    static func take(from channel: any Channel) async throws -> DirectWriteSocket {
        guard let provider = channel as? any SocketOptionProvider else {
            throw ProtocolFailure("this connection's socket cannot be read directly")
        }
        let cookie: UInt64 = try await provider.unsafeGetSocketOption(
            level: .socket, name: NIOBSDSocket.Option(rawValue: protd_so_cookie)).get()
        try await channel.setOption(ChannelOptions.autoRead, value: false).get()
        guard let fd = duplicate(socketWithCookie: cookie) else {
            try? await channel.setOption(ChannelOptions.autoRead, value: true).get()
            throw ProtocolFailure("this connection's socket was not found among the daemon's descriptors")
        }
        let socket = DirectWriteSocket(fd: fd)
        channel.closeFuture.whenComplete { _ in socket.shutDown() }
        return socket
    }

    /// Lets NIO read `channel` again.
    static func resume(_ channel: any Channel) async {
        try? await channel.setOption(ChannelOptions.autoRead, value: true).get()
    }

    /// Reads exactly `buffer.count` bytes, waiting for them; fails at the
    /// end of the stream (`ChannelError.eof`) or on an error.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws {
        var filled = 0
        while filled < buffer.count {
            let count = Glibc.read(fd, buffer.baseAddress! + filled, buffer.count - filled)
            if count > 0 {
                filled += count
            } else if count == 0 || errno == ECONNRESET {
                // The client left (or the channel closed): as on the event loop.
                throw ChannelError.eof
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                // The descriptor is NIO's, non-blocking: wait until it is readable.
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, -1)
            } else if errno != EINTR {
                throw ProtocolFailure("reading the direct write failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Reads exactly `count` bytes into a new array.
    func read(count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        try bytes.withUnsafeMutableBytes { try read(into: $0) }
        return bytes
    }

    /// Closes the duplicate; the channel keeps the socket.
    func close() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            _ = Glibc.close(fd)
        }
    }

    /// Ends the socket for both sides, waking a waiting read (the channel
    /// closed: the client left, or the daemon is stopping).
    private func shutDown() {
        closed.withLock { closed in
            if !closed { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// A duplicate of the descriptor whose socket has `cookie`, checked on
    /// the duplicate itself (a descriptor number may be closed and reused
    /// while the list is read).
    private static func duplicate(socketWithCookie cookie: UInt64) -> Int32? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let number = Int32(name), self.cookie(of: number) == cookie else { continue }
            let copy = fcntl(number, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else { continue }
            if self.cookie(of: copy) == cookie { return copy }
            _ = Glibc.close(copy)
        }
        return nil
    }

    private static func cookie(of fd: Int32) -> UInt64? {
        var value: UInt64 = 0
        var length = socklen_t(MemoryLayout<UInt64>.size)
        guard getsockopt(fd, SOL_SOCKET, protd_so_cookie, &value, &length) == 0 else { return nil }
        return value
    }
}
