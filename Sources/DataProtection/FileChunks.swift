/// A file's content as a stream of chunks, from `ProtectedFile.readChunks()`.
///
/// Backpressure, not buffering: each iterator opens its own handle on the
/// file (so it reads one consistent file even if the name is rewritten
/// meanwhile) and keeps at most `readAhead` reads of `maximumChunkSize`
/// bytes in flight. The next read is requested only when the consumer
/// takes a chunk, so a slow consumer slows the transfer instead of filling
/// memory, and other requests on the same client are never held up. The
/// handle is closed at the end, on an error, or (in the background) when
/// the iterator is dropped early. If the device locks while a `.complete`
/// file is being read, the next chunk fails with `.protectedDataUnavailable`.
public struct FileChunks: AsyncSequence, Sendable {
    /// Pieces of the content, in order; each at most `maximumChunkSize` bytes.
    public typealias Element = [UInt8]
    /// Why reading stopped.
    public typealias Failure = DataProtectionError

    /// How many chunk reads an iterator keeps in flight.
    public static let readAhead = 4

    let file: ProtectedFile
    let range: Range<UInt64>?

    /// An iterator that opens the file on its first `next()`.
    public func makeAsyncIterator() -> Iterator {
        Iterator(file: file, start: range?.lowerBound ?? 0, end: range?.upperBound ?? UInt64.max)
    }

    /// Reads the chunks of one pass over the file.
    public struct Iterator: AsyncIteratorProtocol {
        private struct InFlight {
            var offset: UInt64
            var length: Int
            var answer: PendingAnswer
        }

        private let file: ProtectedFile
        private let end: UInt64
        private var handle: ProtectedFile.Handle?
        /// Where the next read request starts.
        private var requestOffset: UInt64
        private var inFlight: [InFlight] = []
        private var finished = false

        init(file: ProtectedFile, start: UInt64, end: UInt64) {
            self.file = file
            self.requestOffset = start
            self.end = end
        }

        /// The next chunk, or nil at the end of the file or range.
        public mutating func next() async throws(DataProtectionError) -> [UInt8]? {
            guard !finished else { return nil }
            do {
                return try await advance()
            } catch {
                await finish()
                throw error
            }
        }

        private mutating func advance() async throws(DataProtectionError) -> [UInt8]? {
            let handle = try await openHandle()
            let chunkSize = file.client.maximumChunkSize
            while inFlight.count < FileChunks.readAhead && requestOffset < end {
                let length = Int(Swift.min(UInt64(chunkSize), end - requestOffset))
                inFlight.append(InFlight(offset: requestOffset, length: length,
                                         answer: try await handle.submitRead(offset: requestOffset, length: length)))
                requestOffset += UInt64(length)
            }
            guard !inFlight.isEmpty else {
                await finish()
                return nil
            }
            let read = inFlight.removeFirst()
            let chunk = try await ProtectedFile.Handle.data(of: read.answer)
            guard !chunk.isEmpty else {
                await finish()
                return nil
            }
            if chunk.count < read.length {
                // A short read: the reads ahead assumed a full one, so start
                // again right after what arrived (usually this is the end).
                inFlight.removeAll()
                requestOffset = read.offset + UInt64(chunk.count)
            }
            return chunk
        }

        private mutating func openHandle() async throws(DataProtectionError) -> ProtectedFile.Handle {
            if let handle { return handle }
            let opened = try await file.open(.existing)
            handle = opened
            return opened
        }

        private mutating func finish() async {
            finished = true
            inFlight.removeAll()
            await handle?.close()
            handle = nil
        }
    }
}
