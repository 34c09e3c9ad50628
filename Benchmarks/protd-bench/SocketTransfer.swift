import Foundation
import ProtectionTestSupport
import ProtectionWire

/// The cost of moving bytes across a Unix stream socket, with nothing else:
/// one thread writes the bytes in the workload's pieces into a socket pair
/// with protd's send-buffer size, another reads them. Every protd read and
/// write pays this on top of its crypto and file I/O, on the same cores.
struct SocketTransfer {
    let bytes: Int
    let chunk: Int

    /// One pump: wall-clock seconds, and CPU seconds of both threads.
    struct Pump {
        var seconds: Double
        var cpuSeconds: Double
    }

    enum Failure: Error, CustomStringConvertible {
        case transfer(String)

        var description: String {
            switch self {
            case .transfer(let what): "socket transfer: \(what)"
            }
        }
    }

    /// Pumps `bytes` through a fresh socket pair once.
    func pump() throws -> Pump {
        let (sending, receiving) = try Self.socketPair()
        defer { close(sending); close(receiving) }

        let reader = ReaderThread(fd: receiving, expected: bytes, chunk: chunk)
        let start = ContinuousClock.now
        reader.start()
        let writerCPU = threadCPUSeconds()
        try Self.send(bytes, in: chunk, to: sending)
        let writerSeconds = threadCPUSeconds() - writerCPU
        reader.finished.wait()
        let elapsed = seconds(since: start)
        guard reader.received == bytes else { throw Failure.transfer("read \(reader.received) of \(bytes) bytes") }
        return Pump(seconds: elapsed, cpuSeconds: writerSeconds + reader.cpuSeconds)
    }

    /// A connected Unix stream socket pair whose sending end has protd's
    /// send-buffer size.
    static func socketPair() throws -> (sending: Int32, receiving: Int32) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw SystemCallFailure("socketpair", "AF_UNIX") }
        var sendBuffer = Int32(WireProtocol.socketBufferBytes)
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
        return (fds[0], fds[1])
    }

    /// Sends `bytes` bytes into `fd` in pieces of `chunk`, as a client does.
    static func send(_ bytes: Int, in chunk: Int, to fd: Int32) throws {
        let content = [UInt8](repeating: 0x5A, count: chunk)
        var sent = 0
        while sent < bytes {
            // MSG_NOSIGNAL: a reader that gave up makes this fail, not kill the process.
            let count = content.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, min(chunk, bytes - sent), Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw SystemCallFailure("send", "the socket") }
            sent += count
        }
    }

    /// `repetitions` pumps: wall-clock MiB/s, and CPU milliseconds per MiB.
    func measure(repetitions: Int) throws -> (rate: Sample, cpuMillisecondsPerMiB: Sample) {
        let mebibytes = Double(bytes) / Double(1 << 20)
        let pumps = try (0..<repetitions).map { _ in try pump() }
        return (Sample(values: pumps.map { mebibytes / $0.seconds }),
                Sample(values: pumps.map { 1000 * $0.cpuSeconds / mebibytes }))
    }
}

/// The reading end of a pump, on a thread of its own so that both ends run
/// at once (as protd and its client do).
private final class ReaderThread: @unchecked Sendable {
    let fd: Int32
    let expected: Int
    let chunk: Int
    let finished = DispatchSemaphore(value: 0)
    /// Written by the thread before `finished` is signalled; read after.
    private(set) var received = 0
    private(set) var cpuSeconds = 0.0

    init(fd: Int32, expected: Int, chunk: Int) {
        self.fd = fd
        self.expected = expected
        self.chunk = chunk
    }

    func start() {
        Thread { self.readAll() }.start()
    }

    private func readAll() {
        let start = threadCPUSeconds()
        var buffer = [UInt8](repeating: 0, count: chunk)
        while received < expected {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            received += count
        }
        cpuSeconds = threadCPUSeconds() - start
        finished.signal()
    }
}

/// CPU time the calling thread has used, in seconds.
private func threadCPUSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
