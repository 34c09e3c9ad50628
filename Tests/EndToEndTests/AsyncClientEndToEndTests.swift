import DataProtection
import Foundation
import Glibc
import ProtectionTestSupport
import Synchronization
import Testing

/// The client library suspends instead of blocking: large writes and
/// `readChunks()` leave the process's other tasks running, a cancelled
/// call returns promptly even when the daemon has stopped answering, and
/// every wait is bounded. All against the real daemon.
@Suite("The client never blocks a thread it does not own", .serialized)
struct AsyncClientEndToEndTests {
    static let large = 64 << 20

    /// A large file's content: every byte depends on its position.
    static func content(_ count: Int, seed: UInt8) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: index >> 9) &+ seed }
            initialized = count
        }
    }

    /// Whether `chunk` equals `content` from `offset`.
    static func matches(_ chunk: [UInt8], _ content: [UInt8], at offset: Int) -> Bool {
        guard offset + chunk.count <= content.count else { return false }
        return chunk.withUnsafeBytes { piece in
            content.withUnsafeBytes { whole in memcmp(piece.baseAddress!, whole.baseAddress! + offset, piece.count) == 0 }
        }
    }

    @Test("a 1 ms ticker keeps running while 4 large writes and 4 readChunks run in the same process")
    func tickerKeepsRunningDuringBulkTransfers() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let contents = (0..<4).map { Self.content(Self.large, seed: UInt8($0)) }
        for (index, content) in contents.enumerated() {
            try await client.file("read-\(index)").write(content, durable: false)
        }

        let ticker = Ticker()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, content) in contents.enumerated() {
                group.addTask {
                    let written = try await client.file("write-\(index)").write(content, durable: false)
                    #expect(written == UInt64(Self.large))
                }
                group.addTask {
                    // Checked chunk by chunk with memcmp: comparing whole
                    // arrays in a debug build is itself slow enough to
                    // hold a thread for a noticeable time.
                    var offset = 0
                    var same = true
                    for try await chunk in client.file("read-\(index)").readChunks() {
                        same = same && Self.matches(chunk, content, at: offset)
                        offset += chunk.count
                    }
                    #expect(same && offset == content.count, "readChunks of read-\(index) returned other bytes")
                }
            }
            try await group.waitForAll()
        }
        let gap = await ticker.stop()
        #expect(gap <= .milliseconds(100), "the ticker went \(gap) without running")
        await client.close()
    }

    @Test("a large write and a readChunks end with .cancelled within 1 s while the daemon is stopped")
    func cancellationWhileTheDaemonIsStopped() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("source").write(Self.content(Self.large, seed: 9), durable: false)
        var chunks = client.file("source").readChunks().makeAsyncIterator()
        _ = try #require(try await chunks.next())

        #expect(kill(daemon.pid, SIGSTOP) == 0)
        defer { kill(daemon.pid, SIGCONT) }
        let ticker = Ticker()
        let data = Self.content(4 * Self.large, seed: 3)
        let writer = Task { try await client.file("stalled").write(data, durable: false) }
        let reader = Task { [chunks] in
            var chunks = chunks
            while try await chunks.next() != nil {}
        }
        // Long enough for the write to fill the socket and wait for room.
        try await Task.sleep(for: .milliseconds(500))
        let cancelled = ContinuousClock.now
        writer.cancel()
        reader.cancel()
        let writeError = await EndToEnd.error { _ = try await writer.value }
        let readError = await EndToEnd.error { try await reader.value }
        let took = ContinuousClock.now - cancelled
        #expect(writeError == .cancelled)
        #expect(readError == .cancelled)
        #expect(took < .seconds(1), "the cancelled calls took \(took) to return")
        let gap = await ticker.stop()
        #expect(gap <= .milliseconds(100), "the ticker went \(gap) without running while the daemon was stopped")

        kill(daemon.pid, SIGCONT)
        #expect(try await client.status().state == .unlocked)
        #expect(try await client.file("stalled").exists == false)
        await client.close()
    }

    @Test("a wait for a stopped daemon ends with .timedOut after the request timeout")
    func waitsAreBounded() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath, requestTimeout: .seconds(1))
        #expect(kill(daemon.pid, SIGSTOP) == 0)
        defer { kill(daemon.pid, SIGCONT) }
        let start = ContinuousClock.now
        #expect(await EndToEnd.failure { _ = try await client.status() } == .timedOut)
        let took = ContinuousClock.now - start
        #expect(took >= .seconds(1) && took < .seconds(3), "status gave up after \(took)")
        await client.close()
    }

    @Test("the README's events loop acknowledges a lock within 2 s while 2 tasks write large files")
    func eventsLoopAcknowledgesDuringLargeWrites() async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode(grace: 10)
        try await client.unlock(passcode: EndToEnd.passcode)
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Void.self)
        let listener = Task {
            var events = client.events.makeAsyncIterator()
            _ = try await client.subscribe()
            readyContinuation.yield()
            while let event = try await events.next() {
                if case .willBecomeUnavailable = event.kind { try await client.acknowledge(event) }
            }
        }
        for await _ in ready { break }
        let content = Self.content(Self.large, seed: 5)
        let writers = (0..<2).map { index in
            Task {
                while !Task.isCancelled {
                    _ = try? await client.file("busy-\(index)").write(content, durable: false)
                }
            }
        }
        try await Task.sleep(for: .milliseconds(300))

        let admin = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let start = ContinuousClock.now
        try await admin.lock(grace: .seconds(10))
        let took = ContinuousClock.now - start
        #expect(took < .seconds(2), "the lock took \(took)")
        #expect(try await admin.status().state == .locked)

        for writer in writers { writer.cancel() }
        for writer in writers { await writer.value }
        listener.cancel()
        await admin.close()
        await client.close()
    }
}

/// A task that sleeps 1 ms in a loop and records the longest time between
/// two of its wake-ups: how long the process's tasks could not run.
final class Ticker: Sendable {
    private let task: Task<Duration, Never>

    init() {
        task = Task {
            let clock = ContinuousClock()
            var last = clock.now
            var longest = Duration.zero
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(1))
                let now = clock.now
                longest = max(longest, now - last)
                last = now
            }
            return longest
        }
    }

    /// Stops the ticker and returns the longest gap it saw.
    func stop() async -> Duration {
        task.cancel()
        return await task.value
    }
}
