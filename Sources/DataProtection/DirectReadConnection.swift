internal import ProtectionCore
internal import ProtectionWire

/// A file's chunks read on a connection of its own (`FileChunks`): a
/// blocking socket read from the calling task. It opens a handle there and
/// sends `handleRead`s as the shared connection would, but each chunk's
/// content goes from the socket straight into the array handed out, with
/// none of NIO's buffers and hand-offs between threads: through the shared
/// connection the client spent 0.2-0.35 ms of CPU per MiB against
/// 0.12-0.14 here, and read at about two thirds of the speed
/// (docs/DESIGN.md, Reads). Reading blocks the calling thread while the
/// daemon catches up.
final class DirectReadConnection {
    private let socket: BlockingSocket
    private let handle: UInt32
    /// The chunk size the daemon's frame limit allows.
    let chunkSize: Int
    private var nextID: UInt32 = openID + 1

    private static let openID: UInt32 = BlockingSocket.helloID + 1

    private init(socket: BlockingSocket, handle: UInt32, chunkSize: Int) {
        self.socket = socket
        self.handle = handle
        self.chunkSize = chunkSize
    }

    /// Connects to `socketPath`, says hello and opens `name` (it must
    /// exist). Nil when the daemon has no room for another connection:
    /// the caller then reads on its shared connection. The handle dies
    /// with the connection, when this is released.
    static func open(socketPath: String, clientName: String, name: String)
        throws(DataProtectionError) -> DirectReadConnection? {
        let wireName = try WireText.name(name)
        guard let (socket, chunkSize) = try BlockingSocket.connect(socketPath: socketPath, clientName: clientName,
                                                                   purpose: "a direct read")
        else { return nil }
        let (mode, protection) = OpenMode.existing.wire
        try socket.send(Request.open(name: wireName, mode: mode, protection: protection).frame(requestID: openID))
        switch try socket.readAnswer() {
        case .handleOpened(let handle, _, _):
            return DirectReadConnection(socket: socket, handle: handle, chunkSize: chunkSize)
        case let other:
            throw DataProtectionError.unexpected(other, to: "open")
        }
    }
}

extension DirectReadConnection: ChunkReads {
    /// Sends one `handleRead` of at most one chunk; answers come in order.
    func submitRead(offset: UInt64, length: Int) throws(DataProtectionError) {
        if Task.isCancelled { throw .cancelled }
        let id = nextID
        nextID = nextID == .max ? Self.openID + 1 : nextID + 1
        try socket.send(Request.handleRead(handle: handle, offset: offset, length: UInt32(clamping: length))
            .frame(requestID: id))
    }

    /// The content of the oldest read's answer.
    func data(of _: Void) throws(DataProtectionError) -> [UInt8] {
        let (data, answer) = try socket.readData()
        if let data { return data }
        throw answer.map { DataProtectionError.unexpected($0, to: "handleRead") }
            ?? .protocolError("protd sent no answer to handleRead")
    }

    /// Reads the oldest read's answer and drops it.
    func discard(_ answer: Void) {
        _ = try? socket.readData()
    }
}
