internal import Glibc
internal import NIOCore
internal import ProtectionCore
internal import ProtectionWire

/// A blocking Unix socket to protd, used from the calling task without NIO:
/// the connection of a direct write or a direct read. It says hello, sends
/// frames with `sendmsg` straight from the caller's bytes, and reads frames
/// back with `recv`, a data frame's content straight into the array handed
/// out. Every call blocks the calling thread until the daemon's side moves.
final class BlockingSocket {
    private let fd: Int32
    /// What the connection is for, for error messages ("a direct write").
    private let purpose: String
    /// The connection failed or the daemon closed it; nothing more can go through.
    private(set) var isBroken = false

    private init(fd: Int32, purpose: String) {
        self.fd = fd
        self.purpose = purpose
    }

    deinit { close(fd) }

    /// Connects to `socketPath` and says hello; returns the socket and the
    /// chunk size the daemon's frame limit allows, or nil when the daemon
    /// has no room for another connection (`tooManyConnections`).
    static func connect(socketPath: String, clientName: String, purpose: String)
        throws(DataProtectionError) -> (socket: BlockingSocket, chunkSize: Int)? {
        let socket = BlockingSocket(fd: try openSocket(to: socketPath), purpose: purpose)
        let hello = Request.hello(minimumVersion: WireProtocol.version, maximumVersion: WireProtocol.version,
                                  client: WireText.clientLabel(clientName))
        try socket.send(hello.frame(requestID: helloID))
        switch try socket.readAnswer() {
        case .helloAccepted(let version, let maximumFrameLength, _, _) where version == WireProtocol.version:
            let chunkSize = WireProtocol.chunkSize(forFrameLimit: Int(maximumFrameLength))
            guard chunkSize > 0 else { throw .protocolError("protd's frame limit leaves no room for data") }
            return (socket, chunkSize)
        case .error(let wire) where wire.code == .tooManyConnections:
            return nil
        case let other:
            throw DataProtectionError.unexpected(other, to: "hello")
        }
    }

    /// The hello's request id; a connection's own requests use others.
    static let helloID: UInt32 = 1

    /// Sends `frame`.
    func send(_ frame: Frame) throws(DataProtectionError) {
        try send(Array(buffer: frame.encoded()))
    }

    /// Sends `bytes`.
    func send(_ bytes: [UInt8]) throws(DataProtectionError) {
        let failure = bytes.withUnsafeBytes { bytes in
            Self.failure { () throws(DataProtectionError) in try send([bytes]) }
        }
        if let failure { throw failure }
    }

    /// Sends every byte of `pieces`, in order, with `sendmsg` (no SIGPIPE
    /// when the daemon is gone).
    func send(_ pieces: [UnsafeRawBufferPointer]) throws(DataProtectionError) {
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
                isBroken = true
                throw .daemonUnavailable("the connection to protd broke during \(purpose): \(String(cString: strerror(errno)))")
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

    /// Whether the daemon sent something that waits to be read (an early answer).
    var hasInput: Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    /// Reads one frame and decodes it.
    func readAnswer() throws(DataProtectionError) -> Response {
        let (type, requestID, length) = try readFrameHeader()
        return try decode(type: type, requestID: requestID, body: try readBytes(length))
    }

    /// Reads one frame: the content of a `data` frame straight into a new
    /// array, anything else (an error) decoded as `answer`.
    func readData() throws(DataProtectionError) -> (data: [UInt8]?, answer: Response?) {
        let (type, requestID, length) = try readFrameHeader()
        guard type == MessageType.data.rawValue, length >= 4 else {
            return (nil, try decode(type: type, requestID: requestID, body: try readBytes(length)))
        }
        let count = Int(DirectWriteStream.readBigEndian(try readBytes(4), as: UInt32.self))
        guard count == length - 4 else { throw .protocolError("protd sent a data frame whose count does not match") }
        var failure: DataProtectionError?
        let data = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            failure = Self.failure { () throws(DataProtectionError) in try fill(UnsafeMutableRawBufferPointer(buffer)) }
            initialized = failure == nil ? count : 0
        }
        if let failure { throw failure }
        return (data, nil)
    }

    /// Type, request id and body length of the next frame.
    private func readFrameHeader() throws(DataProtectionError) -> (type: UInt8, requestID: UInt32, bodyLength: Int) {
        let prefix = try readBytes(4 + Frame.headerByteCount)
        let length = Int(DirectWriteStream.readBigEndian(prefix[0..<4], as: UInt32.self))
        guard length >= Frame.headerByteCount, length <= Connection.clientFrameLimit else {
            throw .protocolError("protd sent a frame of \(length) bytes")
        }
        return (prefix[4], DirectWriteStream.readBigEndian(prefix[5...], as: UInt32.self), length - Frame.headerByteCount)
    }

    private func decode(type: UInt8, requestID: UInt32, body: [UInt8]) throws(DataProtectionError) -> Response {
        do {
            return try Response(frame: Frame(type: type, requestID: requestID, body: ByteBuffer(bytes: body)))
        } catch {
            throw .protocolError("protd sent a frame that does not decode: \(error)")
        }
    }

    private func readBytes(_ count: Int) throws(DataProtectionError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let failure = bytes.withUnsafeMutableBytes { buffer in
            Self.failure { () throws(DataProtectionError) in try fill(buffer) }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Fills all of `buffer` from the socket.
    private func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(DataProtectionError) {
        var filled = 0
        while filled < buffer.count {
            let got = recv(fd, buffer.baseAddress! + filled, buffer.count - filled, 0)
            if got > 0 {
                filled += got
            } else if got < 0 && errno == EINTR {
                continue
            } else {
                isBroken = true
                throw .daemonUnavailable("protd closed the connection during \(purpose)")
            }
        }
    }

    /// The error `body` throws, if any (for closures that cannot throw a typed error).
    static func failure(_ body: () throws(DataProtectionError) -> Void) -> DataProtectionError? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }

    /// A blocking Unix socket connected to `path`, with a send buffer that
    /// holds several chunks.
    private static func openSocket(to path: String) throws(DataProtectionError) -> Int32 {
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
