internal import Glibc
internal import NIOPosix
internal import ProtectionCore
internal import ProtectionWire
internal import Synchronization

/// A whole-file write whose chunks the daemon reads from the connection's
/// socket itself, on a thread of its own, each straight into a batch of
/// `batchBytes` that is sealed and written whole (docs/DESIGN.md, Writes:
/// without NIO's read, the decoder's copy and a hand-off per chunk, a
/// large write ran about a fifth faster). The frames are
/// `DirectWriteStream`'s.
enum DirectWrite {
    /// Content gathered before it is sealed and written.
    static let batchBytes = 4 << 20
    /// Direct writes running at once; more are refused, and the client
    /// falls back to `writeBegin`.
    static let maximumRunning = 4

    /// How a direct write ended.
    enum Outcome: Sendable {
        /// Committed: the file's new size.
        case committed(Int)
        /// The client abandoned it.
        case aborted
        /// It failed and the failure was answered at once (`answer`); the
        /// client's remaining frames were read and dropped.
        case failed
    }

    private static let threads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: maximumRunning)
        pool.start()
        return pool
    }()
    private static let running = Mutex(0)

    /// Takes one of the `maximumRunning` places, or returns false.
    static func reserve() -> Bool {
        running.withLock { count in
            guard count < maximumRunning else { return false }
            count += 1
            return true
        }
    }

    /// Gives a place back.
    static func release() { running.withLock { $0 -= 1 } }

    /// Reads the write's frames from `socket` on one of the threads until
    /// its end or abort. A failure while writing is passed to `answer` at
    /// once; a protocol violation or a lost connection is thrown.
    static func run(_ pending: PendingWrite, from socket: DirectWriteSocket, requestID: UInt32, maximumChunk: Int,
                    answer: @escaping @Sendable (any Error) -> Void) async throws -> Outcome {
        let pending = UncheckedPendingWrite(pending)
        return try await threads.runIfActive {
            try Reader(socket: socket, pending: pending.value, requestID: requestID, maximumChunk: maximumChunk,
                       answer: answer).run()
        }
    }
}

/// Hands the write to the pool's thread; only that thread uses it until
/// `run` returns.
private struct UncheckedPendingWrite: @unchecked Sendable {
    let value: PendingWrite
    init(_ value: PendingWrite) { self.value = value }
}

/// One direct write's reading loop.
private struct Reader {
    let socket: DirectWriteSocket
    let pending: PendingWrite
    let requestID: UInt32
    let maximumChunk: Int
    let answer: @Sendable (any Error) -> Void

    func run() throws -> DirectWrite.Outcome {
        let batch = try MappedBuffer.allocate(DirectWrite.batchBytes)
        defer {
            // Plaintext: zeroed before its pages go back.
            memset(batch.baseAddress!, 0, batch.count)
            MappedBuffer.free(batch)
        }
        var filled = 0
        var received: UInt64 = 0
        var failed = false
        do {
            while true {
                let prefix = try socket.read(count: DirectWriteStream.prefixByteCount)
                switch try DirectWriteStream.header(prefix, requestID: requestID, maximumChunk: maximumChunk) {
                case .chunk(let count):
                    try DirectWriteStream.checkChunkCount(try socket.read(count: 4), expected: count)
                    if filled + count > batch.count {
                        if !failed { failed = !append(UnsafeRawBufferPointer(rebasing: batch[..<filled])) }
                        filled = 0
                    }
                    try socket.read(into: UnsafeMutableRawBufferPointer(rebasing: batch[filled..<(filled + count)]))
                    filled += count
                    received += UInt64(count)
                case .end:
                    let total = DirectWriteStream.readBigEndian(try socket.read(count: 8), as: UInt64.self)
                    if failed { return .failed }
                    guard total == received else {
                        throw ProtocolViolation("the client sent \(total) bytes of a direct write; the daemon read \(received)")
                    }
                    guard append(UnsafeRawBufferPointer(rebasing: batch[..<filled])) else { return .failed }
                    do {
                        return .committed(try pending.commit())
                    } catch {
                        answer(error)
                        return .failed
                    }
                case .abort:
                    pending.abort()
                    return failed ? .failed : .aborted
                }
            }
        } catch {
            pending.abort()
            throw error
        }
    }

    /// Appends `bytes`; on failure (which aborts the write) answers at once
    /// and returns false, and what follows is read and dropped.
    private func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        do {
            try pending.append(bytes)
            return true
        } catch {
            answer(error)
            return false
        }
    }
}
