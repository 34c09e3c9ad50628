import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

@Suite("Lock events through the daemon", .serialized)
struct EventEndToEndTests {
    /// `count` subscribed clients, each collecting 3 events and acknowledging.
    private static func acknowledgingSubscribers(
        _ count: Int, _ daemon: DaemonProcess
    ) async throws -> ([DataProtectionClient], [Task<[ProtectionEvent], any Error>]) {
        var clients: [DataProtectionClient] = []
        var tasks: [Task<[ProtectionEvent], any Error>] = []
        for _ in 0..<count {
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            _ = try await client.subscribe()
            clients.append(client)
            tasks.append(EndToEnd.collect(client, count: 3, acknowledge: true))
        }
        return (clients, tasks)
    }

    @Test("three subscribers get will, did-unavailable and did-available in order, and their acknowledgements end the grace period early")
    func threeSubscribersAcknowledge() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 30)
        defer { _ = daemon }
        try await admin.unlock(passcode: EndToEnd.passcode)
        let (subscribers, tasks) = try await Self.acknowledgingSubscribers(3, daemon)
        let started = ContinuousClock.now
        try await admin.lock(waitUntilLocked: true)
        let lockTime = ContinuousClock.now - started
        #expect(lockTime < .seconds(10), "the lock waited \(lockTime) although everyone acknowledged")
        try await admin.unlock(passcode: EndToEnd.passcode)
        for task in tasks {
            let events = try await task.value
            #expect(events.count == 3)
            guard events.count == 3 else { continue }
            if case .willBecomeUnavailable = events[0].kind {} else { Issue.record("first event was \(events[0])") }
            #expect(events[1].kind == .didBecomeUnavailable)
            #expect(events[2].kind == .didBecomeAvailable(firstUnlock: false))
            #expect(events.map(\.state) == [.locking, .locked, .unlocked])
            #expect(events[1].sequence == events[0].sequence + 1 && events[2].sequence == events[1].sequence + 1)
        }
        for client in subscribers { await client.close() }
    }

    @Test("a subscriber that never reads delays the lock only until the deadline and does not starve the others")
    func deadSubscriberDoesNotBlock() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 2)
        defer { _ = daemon }
        try await admin.unlock(passcode: EndToEnd.passcode)
        // A raw subscriber that sends subscribe and then never reads a byte.
        let silent = try RawConnection(path: daemon.socketPath)
        try silent.handshake()
        try silent.send(type: 0x17, id: 2, body: [])
        let (others, tasks) = try await Self.acknowledgingSubscribers(2, daemon)
        let started = ContinuousClock.now
        try await admin.lock(waitUntilLocked: true)
        let lockTime = ContinuousClock.now - started
        #expect(lockTime >= .seconds(1.5), "the lock did not wait for the silent subscriber (\(lockTime))")
        #expect(lockTime < .seconds(6), "the silent subscriber held the lock for \(lockTime)")
        try await admin.unlock(passcode: EndToEnd.passcode)
        for task in tasks {
            #expect(try await task.value.map(\.state) == [.locking, .locked, .unlocked])
        }
        for client in others { await client.close() }
        silent.close()
    }

    @Test("acknowledge on the wire: an error without a subscription, no answer with one, and it completes the lock")
    func acknowledgeOnTheWire() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 60)
        defer { _ = daemon }
        try await admin.unlock(passcode: EndToEnd.passcode)
        let raw = try RawConnection(path: daemon.socketPath)
        defer { raw.close() }
        try raw.handshake()
        let acknowledge: UInt8 = 0x18, status: UInt8 = 0x02, error: UInt8 = 0x8F, statusReport: UInt8 = 0x82
        func sequenceBytes(_ sequence: UInt64) -> [UInt8] { withUnsafeBytes(of: sequence.bigEndian, Array.init) }
        try raw.send(type: acknowledge, id: 5, body: sequenceBytes(1))
        let refused = try #require(try raw.readFrame())
        #expect(refused.type == error && refused.id == 5)
        #expect(Array(refused.body.prefix(2)) == [0, 10], "expected invalidArgument")
        try raw.send(type: 0x17, id: 6, body: [])
        #expect(try raw.readFrame()?.type == 0x8B)
        let will = try await admin.status().eventSequence + 1
        try await admin.lock(waitUntilLocked: false)
        #expect(try raw.readFrame()?.type == 0xC0)
        try raw.send(type: acknowledge, id: 7, body: sequenceBytes(will))
        try raw.send(type: status, id: 8, body: [])
        // The lock's completion event may come first; nothing answers id 7.
        var frames: [(type: UInt8, id: UInt32, body: [UInt8])] = []
        while let frame = try raw.readFrame() {
            frames.append(frame)
            if frame.id == 8 { break }
        }
        #expect(frames.last?.type == statusReport)
        #expect(!frames.contains { $0.id == 7 })
        // The grace is 60 s: locked within 5 means the acknowledgement counted.
        let deadline = ContinuousClock.now + .seconds(5)
        while try await admin.status().state != .locked, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await admin.status().state == .locked)
    }

    @Test("the client refuses to acknowledge before it has subscribed")
    func acknowledgeNeedsSubscription() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 60)
        defer { _ = daemon }
        let event = ProtectionEvent(kind: .didBecomeUnavailable, sequence: 1, state: .locked)
        await #expect(throws: DataProtectionError.self) { try await admin.acknowledge(event) }
    }

    @Test("a reconnecting client resynchronises from the subscribe status")
    func resynchroniseAfterReconnect() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 0)
        defer { _ = daemon }
        try await admin.unlock(passcode: EndToEnd.passcode)
        try await admin.lock()
        let late = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let status = try await late.subscribe()
        #expect(status.state == .locked)
        #expect(status.eventSequence == 3)
    }
}
