internal import ProtectionWire

/// The pipelined chunk reads behind `Handle.read` and `FileChunks`: the
/// bytes of `start..<end` of an open handle, in order, with at most
/// `FileChunks.readAhead` `handleRead`s of one chunk each in flight.
struct ReadAhead {
    private struct InFlight {
        var offset: UInt64
        var length: Int
        var answer: PendingAnswer
    }

    private let handle: ProtectedFile.Handle
    private let chunkSize: Int
    /// Where reading stops (exclusive); the file's end may come first.
    private var end: UInt64
    /// Where the next read request starts.
    private var requestOffset: UInt64
    private var inFlight: [InFlight] = []

    /// Reads `start..<end` of `handle` (`end` may lie past the file's end).
    init(handle: ProtectedFile.Handle, start: UInt64, end: UInt64) {
        self.handle = handle
        self.chunkSize = handle.connection.maximumChunkSize
        self.requestOffset = start
        self.end = end
    }

    /// The next piece (at most one chunk), or nil at the end of the file or
    /// range; `.cancelled` once the task is cancelled, even when the answer
    /// is already here.
    mutating func next() async throws(DataProtectionError) -> [UInt8]? {
        if Task.isCancelled { throw .cancelled }
        while inFlight.count < FileChunks.readAhead && requestOffset < end {
            let length = Int(min(UInt64(chunkSize), end - requestOffset))
            inFlight.append(InFlight(offset: requestOffset, length: length,
                                     answer: try await handle.submitRead(offset: requestOffset, length: length)))
            requestOffset += UInt64(length)
        }
        guard !inFlight.isEmpty else { return nil }
        let read = inFlight.removeFirst()
        let piece = try await handle.data(of: read.answer)
        if piece.count < read.length {
            // A short answer is the end of the file, unless a daemon cut it
            // at a smaller chunk than this client uses (chunks are whole
            // multiples of WireProtocol.chunkAlignment): then the reads
            // ahead start again right after it. An empty answer ends it.
            // Answers to the reads ahead are dropped when they come.
            inFlight.removeAll()
            let resumesAt = read.offset + UInt64(piece.count)
            let cut = !piece.isEmpty && piece.count % WireProtocol.chunkAlignment == 0
            requestOffset = resumesAt
            if !cut { end = resumesAt }
        }
        return piece.isEmpty ? nil : piece
    }
}
