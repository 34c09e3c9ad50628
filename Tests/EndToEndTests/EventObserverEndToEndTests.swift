import DataProtection
import ProtectionTestSupport
import Synchronization
import Testing

@Suite("Event observers through the daemon", .serialized)
struct EventObserverEndToEndTests {
    /// The events an observer was called with, in order.
    private final class Seen: Sendable {
        private let events = Mutex<[ProtectionEvent]>([])

        func append(_ event: ProtectionEvent) { events.withLock { $0.append(event) } }
        var all: [ProtectionEvent] { events.withLock { $0 } }

        /// Waits up to 5 s for `count` events; returns what it has then.
        func waitFor(_ count: Int) async throws -> [ProtectionEvent] {
            let deadline = ContinuousClock.now + .seconds(5)
            while all.count < count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            return all
        }
    }

    /// An unlocked daemon with a `grace` second grace period, its admin
    /// client, and a second client whose observer notes every event and
    /// replies `reply`.
    private struct Observed {
        let daemon: DaemonProcess
        let admin: DataProtectionClient
        let subscriber: DataProtectionClient
        let seen = Seen()
        let observation: EventObservation

        init(grace: Double, reply: EventReply) async throws {
            (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: grace)
            try await admin.unlock(passcode: EndToEnd.passcode)
            subscriber = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            let seen = self.seen
            observation = try await subscriber.observeEvents { event in
                seen.append(event)
                return reply
            }
        }
    }

    @Test("an observer gets will, did-unavailable and did-available in order, and its acknowledgement ends the grace period early")
    func observerAcknowledges() async throws {
        let observed = try await Observed(grace: 30, reply: .acknowledge)
        let (admin, subscriber, seen) = (observed.admin, observed.subscriber, observed.seen)
        let started = ContinuousClock.now
        try await admin.lock(waitUntilLocked: true)
        let lockTime = ContinuousClock.now - started
        #expect(lockTime < .seconds(10), "the lock waited \(lockTime) although the observer acknowledged")
        try await admin.unlock(passcode: EndToEnd.passcode)
        let events = try await seen.waitFor(3)
        try #require(events.count == 3, "observed \(events)")
        if case .willBecomeUnavailable = events[0].kind {} else { Issue.record("first event was \(events[0])") }
        #expect(events[1].kind == .didBecomeUnavailable)
        #expect(events[2].kind == .didBecomeAvailable(firstUnlock: false))
        #expect(events.map(\.state) == [.locking, .locked, .unlocked])
        #expect(events[1].sequence == events[0].sequence + 1 && events[2].sequence == events[1].sequence + 1)
        observed.observation.cancel()
        await subscriber.close()
    }

    @Test("an observer that replies none leaves the lock waiting until its client leaves")
    func observerWithoutAcknowledgementHoldsTheLock() async throws {
        let observed = try await Observed(grace: 60, reply: .none)
        let (admin, seen) = (observed.admin, observed.seen)
        try await admin.lock(waitUntilLocked: false)
        #expect(try await seen.waitFor(1).count == 1)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await admin.status().state == .locking)
        // The daemon counts a departure as an acknowledgement.
        await observed.subscriber.close()
        let deadline = ContinuousClock.now + .seconds(5)
        while try await admin.status().state != .locked, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await admin.status().state == .locked)
        withExtendedLifetime(observed) {}
    }

    @Test("a cancelled or released observation is called no more, while an iterator on the same client still gets the events")
    func cancelledAndReleasedObserversStop() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 0)
        defer { _ = daemon }
        try await admin.unlock(passcode: EndToEnd.passcode)
        let subscriber = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let cancelledSeen = Seen(), releasedSeen = Seen()
        let cancelled = try await subscriber.observeEvents { cancelledSeen.append($0); return .acknowledge }
        var released: EventObservation? = try await subscriber.observeEvents { releasedSeen.append($0); return .acknowledge }
        cancelled.cancel()
        released = nil
        var events = subscriber.events.makeAsyncIterator()
        try await admin.lock(waitUntilLocked: true)
        // Events reach iterators before observers, in the same turn of the I/O thread.
        var iterated: [ProtectionEvent] = []
        while iterated.count < 2, let event = try await events.next() { iterated.append(event) }
        #expect(iterated.map(\.kind).last == .didBecomeUnavailable)
        #expect(cancelledSeen.all.isEmpty)
        #expect(releasedSeen.all.isEmpty)
        #expect(released == nil)
        await subscriber.close()
    }

    @Test("observing on a closed client fails with clientClosed")
    func observingAClosedClientFails() async throws {
        let (daemon, admin) = try await EndToEnd.daemonWithPasscode(grace: 0)
        defer { _ = daemon }
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        await client.close()
        do {
            _ = try await client.observeEvents { _ in .none }
            Issue.record("observeEvents on a closed client succeeded")
        } catch {
            guard case .clientClosed = error else {
                Issue.record("expected clientClosed, got \(error)")
                return
            }
        }
        _ = admin
    }
}
