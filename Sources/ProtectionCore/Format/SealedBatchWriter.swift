/// Where a stream's sealed batches go: the caller seals each into
/// `nextBuffer`, one buffer reused for every batch, then `write`s it with
/// one `pwrite` on the caller's thread. Use from one thread at a time.
final class SealedBatchWriter {
    private let fd: Int32
    private let path: String
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { buffer.deallocate() }

    /// The buffer to fill next, at least `count` bytes.
    func nextBuffer(count: Int) -> UnsafeMutableRawBufferPointer {
        if buffer.count < count {
            buffer.deallocate()
            buffer = .allocate(byteCount: count, alignment: 64)
        }
        return buffer
    }

    /// Writes the first `count` bytes of the buffer at `offset`.
    func write(count: Int, at offset: Int) throws {
        try Posix.pwrite(fd, UnsafeRawBufferPointer(rebasing: buffer[..<count]), at: offset, path: path)
    }
}
