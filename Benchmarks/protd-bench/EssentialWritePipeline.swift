import Foundation
import ProtectionTestSupport
import ProtectionCore
import ProtectionWire
import Sodium

/// The large write's essential work with nothing of protd's around it:
/// the bytes arrive over a Unix socket pair (protd's send-buffer size, in
/// the client's pieces); one thread reads a batch at a time straight into
/// its buffer and seals its 64 KiB segments with protd's cipher and stored
/// layout (a random nonce each); a second thread writes each sealed batch
/// into a new file with one `pwrite` while the next is read and sealed. No
/// framing, no event loop, no copies beyond the kernel's. Of the
/// arrangements of this work tried on the 2-core VM (docs/DESIGN.md,
/// section Writes) this was the fastest, and larger batches were faster
/// still, so what it reaches is what a write through a socket can reach
/// here in practice.
struct EssentialWritePipeline {
    let bytes: Int
    /// The pieces the sender writes.
    let piece: Int
    /// Bytes read, sealed and written as one batch (protd: its chunk size).
    let batch: Int
    let directory: String
    let cipher: ContentCipher

    static let segment = LargeFileWorkload.segment
    /// A segment as stored: nonce, ciphertext, tag.
    var storedSegment: Int { Self.segment + cipher.aead.nonceByteCount + cipher.aead.tagByteCount }

    /// `repetitions` runs, each into a new file and after `before`: MiB/s.
    func measure(repetitions: Int, before: () throws -> Void) throws -> Sample {
        let mebibytes = Double(bytes) / Double(1 << 20)
        return Sample(values: try (0..<repetitions).map { _ in
            try before()
            return mebibytes / (try run())
        })
    }

    /// One run: seconds from the first byte sent to the last batch written.
    func run() throws -> Double {
        guard bytes % Self.segment == 0, batch % Self.segment == 0 else {
            throw SocketTransfer.Failure.transfer("the size and the batch must be multiples of \(Self.segment)")
        }
        let path = directory + "/protd-bench-pipeline-\(getpid())"
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw SystemCallFailure("open", path) }
        defer { close(fd); unlink(path) }
        let (sending, receiving) = try SocketTransfer.socketPair()
        defer { close(sending); close(receiving) }

        let key = try SecretBytes.random(count: 32)
        let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: batch, alignment: 64)
        let sealed = (0..<2).map { _ in
            UnsafeMutableRawBufferPointer.allocate(byteCount: batch / Self.segment * storedSegment, alignment: 64)
        }
        defer {
            plain.deallocate()
            for buffer in sealed { buffer.deallocate() }
        }
        let writer = BatchWriterThread(fd: fd, path: path)
        let sender = SenderThread(fd: sending, bytes: bytes, piece: piece)
        let start = ContinuousClock.now
        writer.start()
        sender.start()
        defer { writer.stop() }
        do {
            try sealEveryBatch(from: receiving, through: plain, into: sealed, key: key, writer: writer)
            try writer.finish()
        } catch {
            // The sender must be done with its socket before it is closed.
            shutdown(receiving, Int32(SHUT_RDWR))
            sender.finished.wait()
            throw error
        }
        let elapsed = seconds(since: start)
        sender.finished.wait()
        if let failure = sender.failure { throw failure }
        return elapsed
    }

    /// Reads each batch from `socket` into `plain`, seals its segments into
    /// the two `sealed` buffers in turn and hands each to `writer`.
    private func sealEveryBatch(from socket: Int32, through plain: UnsafeMutableRawBufferPointer,
                                into sealed: [UnsafeMutableRawBufferPointer], key: SecretBytes,
                                writer: BatchWriterThread) throws {
        let additionalData = [UInt8](repeating: 1, count: 25)
        var received = 0
        var written = 0
        try key.whileReadable {
            var index = 0
            while received < bytes {
                defer { index += 1 }
                let count = min(plain.count, bytes - received)
                try Self.readFully(socket, into: UnsafeMutableRawBufferPointer(rebasing: plain[..<count]))
                received += count
                let output = sealed[index % 2]
                let segments = count / Self.segment
                for position in 0..<segments {
                    let slot = UnsafeMutableRawBufferPointer(
                        rebasing: output[(position * storedSegment)..<((position + 1) * storedSegment)])
                    let nonce = UnsafeMutableRawBufferPointer(rebasing: slot[..<cipher.aead.nonceByteCount])
                    try SecureRandom.fill(nonce)
                    let segment = UnsafeRawBufferPointer(
                        rebasing: plain[(position * Self.segment)..<((position + 1) * Self.segment)])
                    try additionalData.withUnsafeBytes { ad in
                        try cipher.aead.seal(segment, additionalData: ad, nonce: UnsafeRawBufferPointer(nonce), key: key,
                                             into: UnsafeMutableRawBufferPointer(rebasing: slot[nonce.count...]))
                    }
                }
                let stored = segments * storedSegment
                try writer.write(UnsafeRawBufferPointer(rebasing: output[..<stored]), at: written)
                written += stored
            }
        }
    }

    /// Reads until `buffer` is full.
    private static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws {
        var filled = 0
        while filled < buffer.count {
            let count = Glibc.read(fd, buffer.baseAddress! + filled, buffer.count - filled)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                if count == 0 { throw SocketTransfer.Failure.transfer("the sender stopped early") }
                throw SystemCallFailure("read", "the socket")
            }
            filled += count
        }
    }
}

/// The pipeline's client: writes the bytes into the socket on a thread of
/// its own.
private final class SenderThread: @unchecked Sendable {
    let fd: Int32
    let bytes: Int
    let piece: Int
    let finished = DispatchSemaphore(value: 0)
    /// Set by the thread before `finished` is signalled; read after.
    private(set) var failure: (any Error)?

    init(fd: Int32, bytes: Int, piece: Int) {
        self.fd = fd
        self.bytes = bytes
        self.piece = piece
    }

    func start() {
        Thread {
            do { try SocketTransfer.send(self.bytes, in: self.piece, to: self.fd) } catch { self.failure = error }
            self.finished.signal()
        }.start()
    }
}

/// Writes one sealed batch at a time into the file, on a thread of its own,
/// while the caller seals the next into the other buffer.
private final class BatchWriterThread: @unchecked Sendable {
    let fd: Int32
    let path: String
    /// Signalled when the thread is free for the next batch.
    private let idle = DispatchSemaphore(value: 1)
    /// Signalled when a batch (or the stop) is handed over.
    private let work = DispatchSemaphore(value: 0)
    /// Handed over under `work`, read back under `idle`.
    private var batch: (bytes: UnsafeRawBufferPointer, offset: Int)?
    private var stopping = false
    private var failure: (any Error)?

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    func start() {
        Thread { self.loop() }.start()
    }

    /// Hands `bytes` over once the previous batch is written; `bytes` stays
    /// untouched until the batch after it is handed over.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws {
        idle.wait()
        if let failure { idle.signal(); throw failure }
        batch = (bytes, offset)
        work.signal()
    }

    /// Waits for the last batch.
    func finish() throws {
        idle.wait()
        defer { idle.signal() }
        if let failure { throw failure }
    }

    /// Writes all of `buffer` at `offset`, as protd's store does.
    private static func writeFully(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int, path: String) throws {
        var done = 0
        while done < buffer.count {
            let written = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if written > 0 { done += written; continue }
            if written < 0, errno == EINTR { continue }
            throw SystemCallFailure("pwrite", path, errno: written == 0 ? EIO : errno)
        }
    }

    /// Ends the thread (after `finish()`, or after a failure).
    func stop() {
        idle.wait()
        stopping = true
        work.signal()
        // Back to its first value: libdispatch traps on freeing a semaphore below it.
        idle.signal()
    }

    private func loop() {
        while true {
            work.wait()
            if stopping { return }
            if let (bytes, offset) = batch, failure == nil {
                do { try Self.writeFully(fd, bytes, at: offset, path: path) } catch { failure = error }
            }
            batch = nil
            idle.signal()
        }
    }
}
