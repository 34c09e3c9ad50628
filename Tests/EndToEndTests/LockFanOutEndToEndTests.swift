import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

@Suite("Lock fan-out through the daemon", .serialized)
struct LockFanOutEndToEndTests {
    /// Listens on `client` from before this returns; the task ends with
    /// when the first will-become-unavailable arrived, after acknowledging
    /// it, or closing the client instead when `leave` is set.
    private static func listen(_ client: DataProtectionClient, leave: Bool = false) async -> Task<ContinuousClock.Instant, any Error> {
        let (ready, signal) = AsyncStream.makeStream(of: Void.self)
        let task = Task {
            var events = client.events.makeAsyncIterator()
            signal.yield()
            while let event = try await events.next() {
                guard case .willBecomeUnavailable = event.kind else { continue }
                let receivedAt = ContinuousClock.now
                if leave { await client.close() } else { try await client.acknowledge(event) }
                return receivedAt
            }
            throw DataProtectionError.daemonUnavailable("the events ended before the lock")
        }
        for await _ in ready { break }
        return task
    }

    private static func subscribedClients(_ count: Int, _ daemon: DaemonProcess) async throws -> [DataProtectionClient] {
        var clients: [DataProtectionClient] = []
        for _ in 0..<count {
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            _ = try await client.subscribe()
            clients.append(client)
        }
        return clients
    }

    @Test("thirty subscribers acknowledging at once end the grace period at once, one that disconnects counting as acknowledging")
    func acknowledgementsCompleteTheLock() async throws {
        // Thirty subscribers of the test's one uid: more than the default 16.
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(
            grace: 60, extraConfig: "limits:\n  max-subscribers-per-uid: 30\n")
        defer { _ = daemon }
        try await admin.unlock(passcode: EndToEnd.passcode)
        let clients = try await Self.subscribedClients(30, daemon)
        var listeners: [Task<ContinuousClock.Instant, any Error>] = []
        for (index, client) in clients.enumerated() { listeners.append(await Self.listen(client, leave: index == 0)) }
        let started = ContinuousClock.now
        try await admin.lock(waitUntilLocked: true)
        let lockTime = ContinuousClock.now - started
        #expect(lockTime < .seconds(10), "the lock waited \(lockTime) although everyone acknowledged or left")
        for listener in listeners { _ = try await listener.value }
        #expect(try await admin.status().state == .locked)
        for client in clients { await client.close() }
    }

    @Test("a subscriber that never reads does not delay the others' events; its departure ends the wait")
    func silentSubscriberDoesNotDelayOthers() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 60)
        defer { _ = daemon }
        try await admin.unlock(passcode: EndToEnd.passcode)
        // Subscribes, then never reads a byte and never acknowledges.
        let silent = try RawConnection(path: daemon.socketPath)
        try silent.handshake()
        try silent.send(type: 0x17, id: 2, body: [])
        let clients = try await Self.subscribedClients(10, daemon)
        var listeners: [Task<ContinuousClock.Instant, any Error>] = []
        for client in clients { listeners.append(await Self.listen(client)) }
        let started = ContinuousClock.now
        try await admin.lock(waitUntilLocked: false)
        for listener in listeners {
            let delay = started.duration(to: try await listener.value)
            #expect(delay < .seconds(5), "a subscriber got the event after \(delay)")
        }
        #expect(try await admin.status().state == .locking, "the silent subscriber is still awaited")
        silent.close()
        #expect(try await EndToEnd.eventually { try await admin.status().state == .locked })
        for client in clients { await client.close() }
    }
}
