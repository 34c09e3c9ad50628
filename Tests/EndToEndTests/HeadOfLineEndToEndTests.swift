import DataProtection
import Foundation
import ProtectionTestSupport
import Synchronization
import Testing

/// One client's long operation does not hold up other clients' short
/// requests: the daemon runs it where it does not take the threads that
/// serve everyone else.
@Suite("No head-of-line blocking", .serialized)
struct HeadOfLineEndToEndTests {
    /// Long requests in flight.
    final class InFlight: Sendable {
        let count = Atomic<Int>(0)
    }

    @Test("while two connections grow files by 512 MiB each through handles, status on a third answers within 50 ms")
    func statusDuringLongHandleWrites() async throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let observer = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        _ = try await observer.status()
        let running = InFlight()
        let writers = try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<2 {
                let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
                let handle = try await client.file("long-\(index)").open(.create(.none))
                group.addTask {
                    running.count.add(1, ordering: .relaxed)
                    defer { running.count.subtract(1, ordering: .relaxed) }
                    // One request that seals 8,192 segments of zeros.
                    #expect(try await handle.truncate(to: 512 << 20) == 512 << 20)
                    try await handle.close()
                    await client.close()
                }
            }
            // Samples only while both long requests are in flight.
            while running.count.load(ordering: .relaxed) < 2 { try await Task.sleep(for: .milliseconds(1)) }
            try await Task.sleep(for: .milliseconds(20))
            var latencies: [Duration] = []
            while running.count.load(ordering: .relaxed) == 2 {
                let start = ContinuousClock.now
                _ = try await observer.status()
                latencies.append(ContinuousClock.now - start)
                try await Task.sleep(for: .milliseconds(5))
            }
            try await group.waitForAll()
            return latencies
        }
        await observer.close()
        #expect(writers.count >= 5, "status was sampled \(writers.count) times during the writes")
        let slowest = writers.max() ?? .zero
        #expect(slowest < .milliseconds(50), "the slowest status took \(slowest) (\(writers.count) samples)")
    }
}
