import DataProtection
import Logging
import ProtectionConfiguration
import ProtectionDaemon
import ProtectionTestSupport
import ServiceLifecycle
import Testing

/// The daemon embedded in the client's own process (a test harness, an
/// application that runs `Daemon` as a `Service`): the two share Swift's
/// cooperative threads, so a client that blocked one would starve the
/// daemon that must answer it.
@Suite("The daemon and a client in one process")
struct InProcessDaemonEndToEndTests {
    @Test("an in-process daemon serves 4 concurrent large writes from a client in the same process")
    func concurrentLargeWritesDoNotDeadlock() async throws {
        let directory = try TemporaryDirectory("in-process")
        defer { directory.remove() }
        let socket = directory.appending("s")
        let configuration = try await DaemonConfiguration.load(
            arguments: ["--socket-path", socket, "--state-directory", directory.appending("state"),
                        "--passcode-argon2-operations", "1", "--passcode-argon2-memory-kib", "8"],
            environment: [:])
        let logger = Logger(label: "protd.in-process")
        let daemon = try Daemon(configuration: configuration, environment: [:], logger: logger)
        let group = ServiceGroup(services: [daemon], logger: logger)
        let running = Task { try await group.run() }

        let client = try await connectWhenReady(socket)
        // Sixteen chunks each: large writes, small enough not to disturb
        // the suite's in-process memory measurements.
        let size = 8 << 20
        try await withThrowingTaskGroup(of: Void.self) { writes in
            for index in 0..<4 {
                writes.addTask {
                    let content = [UInt8](repeating: UInt8(index), count: size)
                    let written = try await client.file("large-\(index)").write(content, durable: false)
                    #expect(written == UInt64(size))
                }
            }
            try await writes.waitForAll()
        }
        for index in 0..<4 {
            #expect(try await client.file("large-\(index)").attributes.size == UInt64(size))
        }
        await client.close()
        await group.triggerGracefulShutdown()
        try await running.value
    }

    /// A client, once the daemon's socket accepts connections (bounded;
    /// generous, as the daemon shares this process with the whole suite).
    private func connectWhenReady(_ socket: String) async throws -> DataProtectionClient {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let client = try? await DataProtectionClient.connect(socketPath: socket) { return client }
            try await Task.sleep(for: .milliseconds(10))
        }
        return try await DataProtectionClient.connect(socketPath: socket)
    }
}
