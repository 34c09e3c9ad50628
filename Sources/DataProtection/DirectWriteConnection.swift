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
    private let socket: BlockingSocket
    /// The chunk size the daemon's frame limit allows (known after the hello).
    private let chunkSize: Int
    /// Bytes sent so far; the end frame carries the total.
    private var sent: UInt64 = 0
    /// Bytes waiting to fill a chunk (pieces shorter than a chunk are gathered).
    private var buffered: [UInt8] = []
    /// `writeEnd` or `writeAbort` went out, or the write failed.
    private var ended = false

    private static let writeID: UInt32 = 2

    private init(socket: BlockingSocket, chunkSize: Int) {
        self.socket = socket
        self.chunkSize = chunkSize
    }

    deinit { Self.wipe(&buffered) }

    /// Connects to `socketPath`, says hello and begins a direct write of
    /// `name`. Nil when the daemon cannot take it (as many direct writes or
    /// connections as it allows, or a daemon that predates direct writes):
    /// the caller then sends the write on its shared connection.
    static func begin(socketPath: String, clientName: String, name: String, protection: ProtectionClass,
                      durable: Bool) throws(DataProtectionError) -> DirectWriteConnection? {
        let wireName = try WireText.name(name)
        guard let (socket, chunkSize) = try BlockingSocket.connect(socketPath: socketPath, clientName: clientName,
                                                                   purpose: "a direct write")
        else { return nil }
        try socket.send(Request.writeDirect(name: wireName, protection: protection, durable: durable)
            .frame(requestID: writeID))
        switch try socket.readAnswer() {
        case .ok:
            return DirectWriteConnection(socket: socket, chunkSize: chunkSize)
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
        let failure = bytes.withUnsafeBytes { bytes in
            BlockingSocket.failure { () throws(DataProtectionError) in try send(bytes) }
        }
        if let failure { throw failure }
    }

    /// Sends what is left and the end; returns the bytes written.
    func finish() throws(DataProtectionError) -> UInt64 {
        if !buffered.isEmpty { try sendBuffered() }
        ended = true
        try socket.send(DirectWriteStream.end(requestID: Self.writeID, total: sent))
        switch try socket.readAnswer() {
        case .size(let size): return size
        case let other: throw DataProtectionError.unexpected(other, to: "writeEnd")
        }
    }

    /// Abandons the write (the old content stays): sends the abort unless
    /// the write ended. Never fails.
    func abandon() {
        guard !ended, !socket.isBroken else { return }
        ended = true
        try? socket.send(DirectWriteStream.abort(requestID: Self.writeID))
    }

    private func sendBuffered() throws(DataProtectionError) {
        var chunk = buffered
        buffered.removeAll(keepingCapacity: true)
        defer { Self.wipe(&chunk) }
        let failure = chunk.withUnsafeBytes { bytes in
            BlockingSocket.failure { () throws(DataProtectionError) in try sendChunk(bytes) }
        }
        if let failure { throw failure }
    }

    private func sendChunk(_ bytes: UnsafeRawBufferPointer) throws(DataProtectionError) {
        try checkForEarlyAnswer()
        let header = DirectWriteStream.chunkHeader(requestID: Self.writeID, count: bytes.count)
        let failure = header.withUnsafeBytes { header in
            BlockingSocket.failure { () throws(DataProtectionError) in try socket.send([header, bytes]) }
        }
        if let failure { throw failure }
        sent += UInt64(bytes.count)
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
        guard socket.hasInput else { return }
        ended = true
        let answer = try socket.readAnswer()
        throw DataProtectionError.unexpected(answer, to: "a direct write's chunk")
    }
}
