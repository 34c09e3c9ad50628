/// A file's content as a stream of chunks, from `ProtectedFile.readChunks()`.
///
/// Backpressure, not buffering: each iterator opens its own handle on the
/// file (so it reads one consistent file even if the name is rewritten
/// meanwhile) and keeps at most `readAhead` reads of `maximumChunkSize`
/// bytes in flight. The handle is opened on a connection of the
/// iterator's own, read with a blocking socket (`DirectReadConnection`):
/// waiting for a chunk blocks the calling thread. When the daemon has no
/// room for another connection, or none can be made, the iterator reads on
/// the client's shared connection instead. The next read is requested
/// only when the consumer takes a chunk, so a slow consumer slows the
/// transfer instead of filling memory, and other requests on the same
/// client are never held up. The handle (with its connection, when it has
/// one of its own) is closed at the end, on an error, or when the iterator
/// is dropped early (in the background, on the shared connection). If the device locks while a `.complete`
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
        /// Where the reads go: a connection of the iterator's own, or a
        /// handle on the shared connection.
        private enum Reads {
            case direct(ReadAhead<DirectReadConnection>)
            case shared(ReadAhead<ProtectedFile.Handle>, ProtectedFile.Handle)
        }

        private let file: ProtectedFile
        private let start: UInt64
        private let end: UInt64
        private var reads: Reads?
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
                if reads == nil { reads = try await open() }
                let chunk: [UInt8]?
                switch reads! {
                case .direct(var ahead):
                    chunk = try await ahead.next()
                    reads = .direct(ahead)
                case .shared(var ahead, let handle):
                    chunk = try await ahead.next()
                    reads = .shared(ahead, handle)
                }
                guard let chunk else {
                    await finish()
                    return nil
                }
                return chunk
            } catch {
                await finish()
                throw error
            }
        }

        /// A connection of the iterator's own; the shared connection when
        /// the daemon has no room for one or none can be made (no
        /// descriptor left, the socket's path removed), where the open
        /// fails in turn if the daemon is really gone.
        private func open() async throws(DataProtectionError) -> Reads {
            let client = file.client
            do {
                if let direct = try DirectReadConnection.open(socketPath: client.socketPath,
                                                              clientName: client.clientName, name: file.name) {
                    return .direct(ReadAhead(source: direct, start: start, end: end))
                }
            } catch .daemonUnavailable(_) {
                // Read on the shared connection below.
            }
            let handle = try await file.open(.existing)
            return .shared(ReadAhead(source: handle, start: start, end: end), handle)
        }

        /// Lets go of the reads: a connection of the iterator's own closes
        /// (and its handle with it), a shared connection's handle is closed.
        private mutating func finish() async {
            finished = true
            if case .shared(_, let handle) = reads { await handle.close() }
            reads = nil
        }
    }
}
