internal import Dispatch
internal import Glibc
internal import Synchronization

/// Where a stream's sealed batches go: the caller seals each into
/// `nextBuffer`, then `write`s it with one `pwrite`. Inline, on the
/// caller's thread, into one reused buffer; or overlapped, from a thread of
/// its own while the caller seals the next batch into a second buffer. On
/// two cores the overlap pays only when the caller does nothing else per
/// batch but seal (a direct write reading its socket: docs/DESIGN.md,
/// Writes); behind NIO's event loop it was slower. Call `finish` (or
/// `drain` on the way out) before the file descriptor closes. Use from one
/// thread at a time.
final class SealedBatchWriter {
    private let fd: Int32
    private let path: String
    /// Set when overlapped: the queue the batches are written from.
    private let queue: DispatchQueue?
    /// One buffer inline; two overlapped, one filled while the other may be written.
    private var buffers: [UnsafeMutableRawBufferPointer] = []
    private var nextIndex = 0
    /// Signalled when the write in flight ends; nil when none is.
    private var inFlight: DispatchSemaphore?
    /// The first failure of a write in flight, thrown by the next call.
    private let failure = FirstFailure()

    init(fd: Int32, path: String, overlapped: Bool) {
        self.fd = fd
        self.path = path
        queue = overlapped ? DispatchQueue(label: "protd.sealed-batch-writer") : nil
    }

    deinit {
        drain()
        for buffer in buffers { release(buffer) }
    }

    /// The buffer to fill next, at least `count` bytes; never one a write
    /// may still be reading.
    func nextBuffer(count: Int) throws -> UnsafeMutableRawBufferPointer {
        if buffers.count <= nextIndex {
            buffers.append(try allocate(count))
        } else if buffers[nextIndex].count < count {
            release(buffers[nextIndex])
            buffers[nextIndex] = try allocate(count)
        }
        return buffers[nextIndex]
    }

    /// Overlapped writes are large and few: their buffers are mapped, so
    /// that they leave nothing resident (`MappedBuffer`). Inline ones come
    /// from malloc, cheaper for the small writes most files get.
    private func allocate(_ count: Int) throws -> UnsafeMutableRawBufferPointer {
        queue == nil ? .allocate(byteCount: count, alignment: 64) : try MappedBuffer.allocate(count)
    }

    private func release(_ buffer: UnsafeMutableRawBufferPointer) {
        if queue == nil { buffer.deallocate() } else { MappedBuffer.free(buffer) }
    }

    /// Writes the first `count` bytes of the buffer `nextBuffer` last
    /// returned at `offset`: at once inline; overlapped, once the write in
    /// flight is done (rethrowing its failure), from the queue.
    func write(count: Int, at offset: Int) throws {
        let bytes = UnsafeRawBufferPointer(rebasing: buffers[nextIndex][..<count])
        guard let queue else { return try Posix.pwrite(fd, bytes, at: offset, path: path) }
        try wait()
        let lent = SendableBytes(bytes)
        let done = DispatchSemaphore(value: 0)
        let (fd, path, failure) = (fd, path, failure)
        queue.async {
            do {
                try Posix.pwrite(fd, lent.pointer, at: offset, path: path)
            } catch {
                failure.record(error)
            }
            done.signal()
        }
        inFlight = done
        nextIndex = 1 - nextIndex
    }

    /// Waits for the write in flight; rethrows the first failure.
    func finish() throws { try wait() }

    /// Waits for the write in flight, ignoring any failure (the write is
    /// being abandoned).
    func drain() { _ = try? wait() }

    private func wait() throws {
        if let inFlight {
            inFlight.wait()
            self.inFlight = nil
        }
        if let error = failure.error { throw error }
    }
}

/// The first error of the writes in flight, shared with the writing thread.
private final class FirstFailure: Sendable {
    private let first = Mutex<(any Error)?>(nil)

    var error: (any Error)? { first.withLock { $0 } }

    func record(_ error: any Error) { first.withLock { if $0 == nil { $0 = error } } }
}

/// A buffer lent to the writing thread, which is done with it before its
/// owner reuses it (`SealedBatchWriter.write` waits first).
private struct SendableBytes: @unchecked Sendable {
    let pointer: UnsafeRawBufferPointer
    init(_ pointer: UnsafeRawBufferPointer) { self.pointer = pointer }
}
