/// A file's content as a stream of chunks, from `ProtectedFile.readChunks()`.
///
/// Backpressure, not buffering: each iterator opens its own handle on the
/// file (so it reads one consistent file even if the name is rewritten
/// meanwhile) and keeps at most `readAhead` reads of `maximumChunkSize`
/// bytes in flight on the client's connection. The next read is requested
/// only when the consumer takes a chunk, so a slow consumer slows the
/// transfer instead of filling memory, and other requests on the same
/// client are never held up. Waiting for a chunk suspends the task; a
/// cancelled task's `next()` throws `.cancelled`. The handle is closed at
/// the end, on an error, or when the iterator is dropped early (in the
/// background). If the device locks while a `.complete` file is being
/// read, the next chunk fails with `.protectedDataUnavailable`.
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
        private let file: ProtectedFile
        private let start: UInt64
        private let end: UInt64
        private var reads: ReadAhead?
        private var handle: ProtectedFile.Handle?
        private var finished = false

        init(file: ProtectedFile, start: UInt64, end: UInt64) {
            self.file = file
            self.start = start
            self.end = end
        }

        /// The next chunk, or nil at the end of the file or range.
        public mutating func next() async throws(DataProtectionError) -> [UInt8]? {
            guard !finished else { return nil }
            do {
                if reads == nil {
                    let opened = try await file.open(.existing)
                    handle = opened
                    reads = ReadAhead(handle: opened, start: start, end: end)
                }
                guard let chunk = try await reads!.next() else {
                    await finish()
                    return nil
                }
                return chunk
            } catch {
                await finish()
                throw error
            }
        }

        /// Closes the handle (in the background when the task is cancelled).
        private mutating func finish() async {
            finished = true
            reads = nil
            await handle?.close()
            handle = nil
        }
    }
}
