internal import Glibc
internal import NIOCore
internal import ProtectionCore
internal import ProtectionWire

/// A direct write (docs/PROTOCOL.md, "Direct writes") on a connection of
/// its own: a blocking socket written from the calling task, each chunk
/// with one `sendmsg` from the caller's bytes, which the daemon reads
/// straight into its batches. Without NIO's hand-offs on either side a
/// large write ran about a fifth faster (docs/DESIGN.md, Writes). Sending
/// blocks the calling thread while the daemon catches up.
final class DirectWriteConnection {
    private let fd: Int32
    /// The chunk size the daemon's frame limit allows (known after the hello).
    private var chunkSize = 0
    /// Bytes sent so far; the end frame carries the total.
    private var sent: UInt64 = 0
    /// Bytes waiting to fill a chunk (pieces shorter than a chunk are gathered).
    private var buffered: [UInt8] = []
    /// `writeEnd` or `writeAbort` went out, or the write failed.
    private var ended = false

    private static let helloID: UInt32 = 1
    private static let writeID: UInt32 = 2

    private init(fd: Int32) { self.fd = fd }

    deinit {
        Self.wipe(&buffered)
        close(fd)
    }

    /// Connects to `socketPath`, says hello and begins a direct write of
    /// `name`. Nil when the daemon cannot take it (as many direct writes or
    /// connections as it allows, or a daemon that predates direct writes):
    /// the caller then sends the write on its shared connection.
    static func begin(socketPath: String, clientName: String, name: String, protection: ProtectionClass,
                      durable: Bool) throws(DataProtectionError) -> DirectWriteConnection? {
        let wireName = try WireText.name(name)
        let connection = DirectWriteConnection(fd: try connect(to: socketPath))
        let hello = Request.hello(minimumVersion: WireProtocol.version, maximumVersion: WireProtocol.version,
                                  client: WireText.clientLabel(clientName))
        try connection.sendFrame(hello.frame(requestID: helloID))
        switch try connection.readAnswer() {
        case .helloAccepted(let version, let maximumFrameLength, _, _) where version == WireProtocol.version:
            connection.chunkSize = WireProtocol.chunkSize(forFrameLimit: Int(maximumFrameLength))
        case .error(let wire) where wire.code == .tooManyConnections:
            // The daemon's connection limit is reached: no room for one more.
            return nil
        case let other:
            throw DataProtectionError.unexpected(other, to: "hello")
        }
        guard connection.chunkSize > 0 else { throw .protocolError("protd's frame limit leaves no room for data") }
        try connection.sendFrame(Request.writeDirect(name: wireName, protection: protection, durable: durable)
            .frame(requestID: writeID))
        switch try connection.readAnswer() {
        case .ok:
            return connection
        case .error(let wire) where wire.code == .tooManyConnections || wire.code == .protocolError:
            // Busy with other direct writes, or a daemon that predates them.
            return nil
        case let other:
            throw DataProtectionError.unexpected(other, to: "writeDirect")
        }
    }

    /// Sends `bytes`: whole chunks straight from them, a short rest
    /// gathered until a chunk is full. Stops on the daemon's early error.
    func send(_ bytes: UnsafeRawBufferPointer) throws(DataProtectionError) {
        var rest = bytes
        if !buffered.isEmpty {
            let taken = min(chunkSize - buffered.count, rest.count)
            buffered.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<taken]))
            rest = UnsafeRawBufferPointer(rebasing: rest[taken...])
            guard buffered.count == chunkSize else { return }
            try sendBuffered()
        }
        while rest.count >= chunkSize {
            try sendChunk(UnsafeRawBufferPointer(rebasing: rest[..<chunkSize]))
            rest = UnsafeRawBufferPointer(rebasing: rest[chunkSize...])
        }
        buffered.append(contentsOf: rest)
    }

    /// Sends `bytes` (see `send(_:)` for raw bytes).
    func send(_ bytes: [UInt8]) throws(DataProtectionError) {
        let failure = bytes.withUnsafeBytes { bytes in Self.failure { () throws(DataProtectionError) in try send(bytes) } }
        if let failure { throw failure }
    }

    /// Sends what is left and the end; returns the bytes written.
    func finish() throws(DataProtectionError) -> UInt64 {
        if !buffered.isEmpty { try sendBuffered() }
        ended = true
        try sendArray(DirectWriteStream.end(requestID: Self.writeID, total: sent))
        switch try readAnswer() {
        case .size(let size): return size
        case let other: throw DataProtectionError.unexpected(other, to: "writeEnd")
        }
    }

    /// Abandons the write (the old content stays): sends the abort unless
    /// the write ended. Never fails.
    func abandon() {
        guard !ended else { return }
        ended = true
        try? sendArray(DirectWriteStream.abort(requestID: Self.writeID))
    }

    private func sendBuffered() throws(DataProtectionError) {
        var chunk = buffered
        buffered.removeAll(keepingCapacity: true)
        defer { Self.wipe(&chunk) }
        let failure = chunk.withUnsafeBytes { bytes in Self.failure { () throws(DataProtectionError) in try sendChunk(bytes) } }
        if let failure { throw failure }
    }

    private func sendChunk(_ bytes: UnsafeRawBufferPointer) throws(DataProtectionError) {
        try checkForEarlyAnswer()
        let header = DirectWriteStream.chunkHeader(requestID: Self.writeID, count: bytes.count)
        let failure = header.withUnsafeBytes { header in
            Self.failure { () throws(DataProtectionError) in try sendBytes([header, bytes]) }
        }
        if let failure { throw failure }
        sent += UInt64(bytes.count)
    }

    private func sendArray(_ bytes: [UInt8]) throws(DataProtectionError) {
        let failure = bytes.withUnsafeBytes { bytes in Self.failure { () throws(DataProtectionError) in try sendBytes([bytes]) } }
        if let failure { throw failure }
    }

    /// The error `body` throws, if any (for closures that cannot throw a typed error).
    private static func failure(_ body: () throws(DataProtectionError) -> Void) -> DataProtectionError? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }

    /// Zeroes `bytes`: gathered content is the caller's plaintext.
    private static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { _ = memset(base, 0, $0.count) } }
    }

    /// Throws the daemon's answer if one came before the end (an error: a
    /// full disk, a lock during a class A write), or `cancelled` for a
    /// cancelled task.
    private func checkForEarlyAnswer() throws(DataProtectionError) {
        if Task.isCancelled { throw .cancelled }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 0) > 0 else { return }
        ended = true
        let answer = try readAnswer()
        throw DataProtectionError.unexpected(answer, to: "a direct write's chunk")
    }

    private func sendFrame(_ frame: Frame) throws(DataProtectionError) {
        try sendArray(Array(buffer: frame.encoded()))
    }

    /// Sends every byte of `pieces`, in order, with `sendmsg` (no SIGPIPE
    /// when the daemon is gone).
    private func sendBytes(_ pieces: [UnsafeRawBufferPointer]) throws(DataProtectionError) {
        var vectors = pieces.map { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count) }
        var first = 0
        var left = pieces.reduce(0) { $0 + $1.count }
        while left > 0 {
            let count = vectors[first...].withUnsafeMutableBufferPointer { vectors -> Int in
                var message = msghdr()
                message.msg_iov = vectors.baseAddress
                message.msg_iovlen = vectors.count
                return sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
            }
            if count < 0 {
                if errno == EINTR { continue }
                ended = true
                throw .daemonUnavailable("the connection to protd broke during a direct write: \(String(cString: strerror(errno)))")
            }
            left -= count
            var consumed = count
            while consumed > 0 && first < vectors.count {
                let taken = min(consumed, vectors[first].iov_len)
                vectors[first].iov_base += taken
                vectors[first].iov_len -= taken
                consumed -= taken
                if vectors[first].iov_len == 0 { first += 1 }
            }
        }
    }

    /// Reads one frame from the daemon and decodes it.
    private func readAnswer() throws(DataProtectionError) -> Response {
        let lengthBytes = try readBytes(4)
        let length = Int(DirectWriteStream.readBigEndian(lengthBytes, as: UInt32.self))
        guard length >= Frame.headerByteCount, length <= Connection.clientFrameLimit else {
            throw .protocolError("protd sent a frame of \(length) bytes")
        }
        let frameBytes = try readBytes(length)
        let frame = Frame(type: frameBytes[0],
                          requestID: DirectWriteStream.readBigEndian(frameBytes[1..<5], as: UInt32.self),
                          body: ByteBuffer(bytes: frameBytes[5...]))
        do {
            return try Response(frame: frame)
        } catch {
            throw .protocolError("protd sent a frame that does not decode: \(error)")
        }
    }

    private func readBytes(_ count: Int) throws(DataProtectionError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + filled, count - filled, 0) }
            if got > 0 {
                filled += got
            } else if got < 0 && errno == EINTR {
                continue
            } else {
                ended = true
                throw .daemonUnavailable("protd closed the connection during a direct write")
            }
        }
        return bytes
    }

    /// A blocking Unix socket connected to `path`, with a send buffer that
    /// holds several chunks.
    private static func connect(to path: String) throws(DataProtectionError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .daemonUnavailable("cannot make a socket: \(String(cString: strerror(errno)))") }
        var size = Int32(WireProtocol.socketBufferBytes)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw .daemonUnavailable("the socket path \(path) is too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .daemonUnavailable("cannot connect to protd at \(path): \(reason)")
        }
        return fd
    }
}
