internal import ProtectionModel
internal import NIOCore
internal import ProtectionWire

/// One whole-file write on the wire: `writeBegin`, `writeChunk`s cut to the
/// connection's chunk size, then `writeEnd` (or `writeAbort`), all with the
/// same request id. The daemon answers once: `.size` after the end, or
/// `.error` at any time; after an error no more chunks are sent, only the
/// `writeAbort` that frees the id (the daemon ignores it without answering).
struct WriteSession {
    private let connection: Connection
    private let pending: PendingAnswer
    private let chunkSize: Int
    /// Bytes waiting to fill a chunk; always shorter than `chunkSize`.
    private var buffered: [UInt8] = []
    /// One `Connection.loopBarrier()` per chunk sent, the oldest first: a
    /// chunk waits for the barrier `chunksAhead` chunks back.
    private var barriers: [EventLoopFuture<Void>] = []
    /// How many chunks a write may run ahead of the event loop. The
    /// NIOAsyncWriter stays writable until the loop has taken what it was
    /// given, so a caller with its data at hand sent 16 chunks and more ahead
    /// of it, each holding its content (docs/DESIGN.md, Memory).
    static let chunksAhead = 4
    /// `writeEnd` or `writeAbort` went out: nothing more may follow.
    private var ended = false

    private init(connection: Connection, pending: PendingAnswer) {
        self.connection = connection
        self.pending = pending
        self.chunkSize = connection.maximumChunkSize
    }

    /// Sends `writeBegin`. The answer is due only after `writeEnd`, so
    /// its timeout starts then: an upload may take as long as its data
    /// keeps going out (each send is bounded on its own).
    static func begin(_ connection: Connection, name: String, protection: ProtectionClass,
                      durable: Bool) async throws(DataProtectionError) -> WriteSession {
        let pending = try await connection.submit([.writeBegin(name: try WireText.name(name), protection: protection,
                                                               durable: durable)], due: false)
        return WriteSession(connection: connection, pending: pending)
    }

    /// Sends every whole chunk `bytes` completes and keeps the rest.
    mutating func append(_ bytes: ArraySlice<UInt8>) async throws(DataProtectionError) {
        var rest = bytes
        if !buffered.isEmpty {
            let taken = min(chunkSize - buffered.count, rest.count)
            buffered.append(contentsOf: rest.prefix(taken))
            rest = rest.dropFirst(taken)
            guard buffered.count == chunkSize else { return }
            try await sendChunk(buffered[...])
            // The chunk sent may still be reading this storage: copy on
            // write gives the next its own.
            buffered.removeAll(keepingCapacity: true)
        }
        while rest.count >= chunkSize {
            try await sendChunk(rest.prefix(chunkSize))
            rest = rest.dropFirst(chunkSize)
        }
        buffered.append(contentsOf: rest)
    }

    /// A whole write of content that fits one chunk: `writeBegin`, the
    /// chunk and `writeEnd` leave in one write, so a small file costs one
    /// round trip and one system call each way.
    static func writeWhole(_ connection: Connection, name: String, protection: ProtectionClass, durable: Bool,
                           content: ArraySlice<UInt8>) async throws(DataProtectionError) -> UInt64 {
        if Task.isCancelled { throw .cancelled }
        let begin = Request.writeBegin(name: try WireText.name(name), protection: protection, durable: durable)
        let chunk = content.isEmpty ? [] : [Request.writeChunk(ByteBuffer(bytes: content))]
        let pending = try await connection.submit([begin] + chunk + [.writeEnd])
        return try await writtenSize(pending)
    }

    /// Sends what is left and `writeEnd`, and returns the bytes written.
    mutating func finish() async throws(DataProtectionError) -> UInt64 {
        if !buffered.isEmpty {
            try await sendChunk(buffered[...])
            buffered = []
        }
        try checkBeforeSending()
        // Ended only once it went out: a send cancelled while it waited for
        // room dropped it, and then `abandon` must still free the write.
        try await connection.send(.writeEnd, requestID: pending.requestID)
        ended = true
        pending.startClock()
        return try await Self.writtenSize(pending)
    }

    /// The size in the answer to `writeEnd`.
    private static func writtenSize(_ pending: PendingAnswer) async throws(DataProtectionError) -> UInt64 {
        let frames = try await pending.frames()
        guard case .size(let written) = frames.first else {
            throw frames.first.map { DataProtectionError.unexpected($0, to: "writeEnd") }
                ?? .protocolError("protd sent an empty answer to writeEnd")
        }
        return written
    }

    /// Gives up: sends `writeAbort` unless `writeEnd` or `writeAbort` already
    /// went out. After an error answer the daemon drops the abort silently,
    /// but it frees the id there. Never fails.
    mutating func abandon() async {
        guard !ended else { return }
        ended = true
        // A cancelled task cannot send: the abort goes out on its own, or
        // the daemon would keep the temporary file until the client leaves.
        guard !Task.isCancelled else {
            return connection.sendDetached(.writeAbort, requestID: pending.requestID)
        }
        try? await connection.send(.writeAbort, requestID: pending.requestID)
    }

    /// Sends one chunk (copied into a frame buffer), once the event loop
    /// has taken the chunk `chunksAhead` back.
    private mutating func sendChunk(_ bytes: ArraySlice<UInt8>) async throws(DataProtectionError) {
        if barriers.count == Self.chunksAhead {
            try? await barriers.removeFirst().get()
        }
        try checkBeforeSending()
        try await connection.send(.writeChunk(ByteBuffer(bytes: bytes)), requestID: pending.requestID)
        barriers.append(connection.loopBarrier())
    }

    /// Stops on an early error answer or a cancelled task.
    private func checkBeforeSending() throws(DataProtectionError) {
        if let error = pending.earlyError() { throw error }
        if Task.isCancelled { throw .cancelled }
    }
}
