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
    /// Runs protd-client-probe (a process of its own, so no other test in
    /// this one can hold up its ticker) and returns its `key=value` lines.
    static func probe(_ arguments: [String]) throws -> [String: String] {
        let result = try CommandRunner.run(CommandRunner.builtProduct("protd-client-probe"), arguments)
        #expect(result.status == 0, "\(result.stderr)")
        var values: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { values[parts[0]] = parts[1] }
        }
        return values
    }

    @Test("a 1 ms ticker keeps running while 4 large writes and 4 readChunks run in the same process")
    func tickerKeepsRunningDuringBulkTransfers() throws {
        let daemon = try DaemonProcess()
        let measured = try Self.probe(["bulk", daemon.socketPath])
        #expect(measured["correct"] == "true", "\(measured)")
        let gap = try #require(measured["gap-ms"].flatMap(Int.init), "\(measured)")
        #expect(gap <= 100, "the ticker went \(gap) ms without running")
    }

    @Test("a large write and a readChunks end with .cancelled within 1 s while the daemon is stopped")
    func cancellationWhileTheDaemonIsStopped() throws {
        let daemon = try DaemonProcess()
        defer { daemon.resume() }
        let measured = try Self.probe(["stopped", daemon.socketPath, "\(daemon.pid)"])
        #expect(measured["write"] == "cancelled", "\(measured)")
        #expect(measured["read"] == "cancelled", "\(measured)")
        let took = try #require(measured["cancel-ms"].flatMap(Int.init), "\(measured)")
        #expect(took < 1000, "the cancelled calls took \(took) ms to return")
        let gap = try #require(measured["gap-ms"].flatMap(Int.init), "\(measured)")
        #expect(gap <= 100, "the ticker went \(gap) ms without running while the daemon was stopped")
        #expect(measured["after"] == "unlocked", "the client did not work again after the daemon resumed: \(measured)")
        #expect(measured["stalled-exists"] == "false", "\(measured)")
    }

    @Test("a wait for a stopped daemon ends with .timedOut after the request timeout")
    func waitsAreBounded() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath, requestTimeout: .seconds(1))
        daemon.suspend()
        defer { daemon.resume() }
        let start = ContinuousClock.now
        #expect(await EndToEnd.failure { _ = try await client.status() } == .timedOut)
        let took = ContinuousClock.now - start
        #expect(took >= .seconds(1) && took < .seconds(3), "status gave up after \(took)")
        await client.close()
    }

    @Test("a large write to a daemon that takes no data ends with .timedOut and closes the stalled connection")
    func stalledSendsAreBounded() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath, requestTimeout: .seconds(1))
        daemon.suspend()
        defer { daemon.resume() }
        let start = ContinuousClock.now
        // More than the socket buffers on both sides hold, so the write must wait.
        let data = [UInt8](repeating: 1, count: 16 << 20)
        #expect(await EndToEnd.failure { _ = try await client.file("stalled").write(data, durable: false) } == .timedOut)
        let took = ContinuousClock.now - start
        #expect(took >= .seconds(1) && took < .seconds(3), "the write gave up after \(took)")
        #expect(await EndToEnd.failure { _ = try await client.status() } == .daemonUnavailable)
        daemon.resume()
        let fresh = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await fresh.file("stalled").exists == false)
        await fresh.close()
    }

    @Test("a subscribe waiting for a stopped daemon ends with .cancelled within 1 s of its task being cancelled")
    func subscribeIsCancellable() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath, requestTimeout: .seconds(10))
        daemon.suspend()
        defer { daemon.resume() }
        let subscribing = Task { await EndToEnd.failure { _ = try await client.subscribe() } }
        try await Task.sleep(for: .milliseconds(200))
        let start = ContinuousClock.now
        subscribing.cancel()
        #expect(await subscribing.value == .cancelled)
        let took = ContinuousClock.now - start
        #expect(took < .seconds(1), "the cancelled subscribe took \(took) to return")
        daemon.resume()
        await client.close()
    }

    @Test("a streamed write lasts longer than the request timeout while its data keeps going out")
    func slowUploadOutlastsTheTimeout() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath, requestTimeout: .seconds(1))
        let piece = [UInt8](repeating: 7, count: 1 << 20)
        // Five pieces half a second apart: 2.5 s in all, each wait short.
        let slowSource = AsyncStream<[UInt8]> { continuation in
            let producer = Task {
                for _ in 0..<5 {
                    continuation.yield(piece)
                    try? await Task.sleep(for: .milliseconds(500))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in producer.cancel() }
        }
        let start = ContinuousClock.now
        let written = try await client.file("slow").write(contentsOf: slowSource, durable: false)
        #expect(ContinuousClock.now - start > .seconds(2))
        #expect(written == 5 << 20)
        let content = try await client.file("slow").read()
        #expect(content.count == 5 << 20 && content.allSatisfy { $0 == 7 })
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
        // Several chunks each (a large write), yet small enough not to
        // disturb the suite's in-process memory measurements.
        let content = [UInt8](repeating: 5, count: 4 << 20)
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
