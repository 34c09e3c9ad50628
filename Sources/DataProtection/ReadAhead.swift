internal import ProtectionWire

/// Where `ReadAhead` sends its reads of one chunk each: a handle on the
/// shared connection, or a direct read's connection of its own.
protocol ChunkReads {
    /// What a sent read leaves to wait on.
    associatedtype Answer
    /// The largest piece one read returns.
    var chunkSize: Int { get }
    /// Sends one read of at most one chunk.
    func submitRead(offset: UInt64, length: Int) async throws(DataProtectionError) -> Answer
    /// The bytes a read answered with.
    func data(of answer: Answer) async throws(DataProtectionError) -> [UInt8]
    /// Lets go of a read whose answer will not be used; answers that come
    /// in order on a connection of their own must still be read past.
    func discard(_ answer: Answer) async
}

/// The pipelined chunk reads behind `Handle.read` and `FileChunks`: the
/// bytes of `start..<end` of an open file, in order, with at most
/// `FileChunks.readAhead` reads of one chunk each in flight.
struct ReadAhead<Source: ChunkReads> {
    private struct InFlight {
        var offset: UInt64
        var length: Int
        var answer: Source.Answer
    }

    private let source: Source
    private let chunkSize: Int
    /// Where reading stops (exclusive); the file's end may come first.
    private var end: UInt64
    /// Where the next read request starts.
    private var requestOffset: UInt64
    private var inFlight: [InFlight] = []

    /// Reads `start..<end` from `source` (`end` may lie past the file's end).
    init(source: Source, start: UInt64, end: UInt64) {
        self.source = source
        self.chunkSize = source.chunkSize
        self.requestOffset = start
        self.end = end
    }

    /// The next piece (at most one chunk), or nil at the end of the file or range.
    mutating func next() async throws(DataProtectionError) -> [UInt8]? {
        while inFlight.count < FileChunks.readAhead && requestOffset < end {
            let length = Int(min(UInt64(chunkSize), end - requestOffset))
            inFlight.append(InFlight(offset: requestOffset, length: length,
                                     answer: try await source.submitRead(offset: requestOffset, length: length)))
            requestOffset += UInt64(length)
        }
        guard !inFlight.isEmpty else { return nil }
        let read = inFlight.removeFirst()
        let piece = try await source.data(of: read.answer)
        if piece.count < read.length {
            // A short answer is the end of the file, unless a daemon cut it
            // at a smaller chunk than this client uses (chunks are whole
            // multiples of WireProtocol.chunkAlignment): then the reads
            // ahead start again right after it. An empty answer ends it.
            for ahead in inFlight { await source.discard(ahead.answer) }
            inFlight.removeAll()
            let resumesAt = read.offset + UInt64(piece.count)
            let cut = !piece.isEmpty && piece.count % WireProtocol.chunkAlignment == 0
            requestOffset = resumesAt
            if !cut { end = resumesAt }
        }
        return piece.isEmpty ? nil : piece
    }
}
