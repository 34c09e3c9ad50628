import Logging
@testable import ProtectionDaemon
import ProtectionCore
import ProtectionTestSupport
import ProtectionWire
import Testing

/// The lock controller against a real store (cheap Argon2id), without
/// sockets: subscribers are the hub's streams.
@Suite("Lock acknowledgements")
struct LockControllerTests {
    private let fixture: StoreFixture
    private let hub = EventHub()
    private let controller: LockController
    private let admin = PeerCredentials(uid: 0, gid: 0, pid: 1, groups: [])
    private static let passcode = "correct horse"

    init() throws {
        fixture = try StoreFixture()
        try fixture.store.setPasscode(StoreFixture.secret(Self.passcode), old: nil)
        controller = LockController(store: fixture.store, hub: hub, defaultGrace: .seconds(60),
                                    logger: Logger(label: "test"))
    }

    private var state: LockState { fixture.store.lockState }

    /// The sequence of the next will-become-unavailable in `events`.
    private static func nextWill(_ events: inout AsyncStream<Frame>.Iterator) async throws -> UInt64 {
        while let frame = await events.next() {
            if case .event(let event) = try Response(frame: frame), event.kind == .willBecomeUnavailable {
                return event.sequence
            }
        }
        Issue.record("the stream ended before a will-become-unavailable event")
        return 0
    }

    @Test("the lock completes as soon as the last awaited subscriber acknowledges")
    func lastAcknowledgementCompletes() async throws {
        let (a, stream) = hub.subscribe()
        let (b, _) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: nil, by: admin)
        let will = try await Self.nextWill(&events)
        await controller.acknowledge(a, sequence: will)
        #expect(state == .locking)
        await controller.acknowledge(b, sequence: will)
        #expect(state == .locked)
    }

    @Test("acknowledgements taken from an event loop count at once, and the last completes the lock")
    func acknowledgementsTakenWithoutWaiting() async throws {
        let (a, stream) = hub.subscribe()
        let (b, _) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: nil, by: admin)
        let will = try await Self.nextWill(&events)
        controller.takeAcknowledgement(a, sequence: will)
        #expect(state == .locking)
        let settled = try await Self.pendingAnswer(controller)
        controller.takeAcknowledgement(b, sequence: will)
        #expect(await settled.first { _ in true } == .locked)
    }

    @Test("an acknowledgement of another event, or a repeated one, does not count")
    func staleAndRepeatedAcknowledgementsDoNotCount() async throws {
        let (a, stream) = hub.subscribe()
        let (b, _) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: nil, by: admin)
        let will = try await Self.nextWill(&events)
        await controller.acknowledge(b, sequence: will - 1)
        await controller.acknowledge(b, sequence: will + 1)
        await controller.acknowledge(a, sequence: will)
        await controller.acknowledge(a, sequence: will)
        #expect(state == .locking)
        await controller.acknowledge(b, sequence: will)
        #expect(state == .locked)
    }

    @Test("a subscriber that leaves no longer holds up the lock")
    func departureCounts() async throws {
        let (a, stream) = hub.subscribe()
        let (b, _) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: nil, by: admin)
        await controller.acknowledge(a, sequence: try await Self.nextWill(&events))
        hub.unsubscribe(b)
        await controller.subscriberLeft(b)
        #expect(state == .locked)
    }

    @Test("a subscriber that arrives during the grace period is not waited for")
    func lateSubscriberIsNotAwaited() async throws {
        let (a, stream) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: nil, by: admin)
        _ = hub.subscribe()
        await controller.acknowledge(a, sequence: try await Self.nextWill(&events))
        #expect(state == .locked)
    }

    @Test("a second, closer lock waits for the first one's subscribers, and only its own event counts")
    func closerLockKeepsTheAwaitedSubscribers() async throws {
        let (a, stream) = hub.subscribe()
        let (b, _) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: .seconds(60), by: admin)
        let first = try await Self.nextWill(&events)
        _ = hub.subscribe()
        try await controller.lock(grace: .seconds(30), by: admin)
        let second = try await Self.nextWill(&events)
        #expect(second > first)
        await controller.acknowledge(a, sequence: first)
        await controller.acknowledge(b, sequence: second)
        #expect(state == .locking)
        await controller.acknowledge(a, sequence: second)
        #expect(state == .locked)
    }

    @Test("an unlock during the grace period ends the wait; the next lock waits for every subscriber again")
    func unlockResetsTheWait() async throws {
        let (a, stream) = hub.subscribe()
        let (b, _) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: nil, by: admin)
        await controller.acknowledge(a, sequence: try await Self.nextWill(&events))
        try await controller.unlock(passcode: StoreFixture.secret(Self.passcode), by: admin)
        #expect(state == .unlocked)
        try await controller.lock(grace: nil, by: admin)
        let will = try await Self.nextWill(&events)
        await controller.acknowledge(b, sequence: will)
        #expect(state == .locking)
        await controller.acknowledge(a, sequence: will)
        #expect(state == .locked)
    }

    @Test("with no subscribers a lock completes at once")
    func noSubscribersLocksAtOnce() async throws {
        try await controller.lock(grace: nil, by: admin)
        #expect(state == .locked)
    }

    /// An owner for answers left with the controller.
    private final class Owner {}

    /// Leaves an answer with the controller while it is locking; the
    /// stream yields the state it is given.
    private static func pendingAnswer(
        _ controller: LockController, for owner: Owner = Owner()
    ) async throws -> AsyncStream<LockState> {
        let (states, continuation) = AsyncStream.makeStream(of: LockState.self)
        let settled = await controller.answerWhenSettled(for: ObjectIdentifier(owner)) { state in
            continuation.yield(state)
            continuation.finish()
        }
        guard settled == nil else {
            Issue.record("expected a pending answer, the state is \(String(describing: settled))")
            throw CancellationError()
        }
        return states
    }

    @Test("a lock-and-wait is answered when the last acknowledgement arrives, and at once when nothing is locking")
    func pendingAnswerOnCompletion() async throws {
        let owner = Owner()
        #expect(await controller.answerWhenSettled(for: ObjectIdentifier(owner)) { _ in Issue.record("answered twice") } == .unlocked)
        let (a, stream) = hub.subscribe()
        var events = stream.makeAsyncIterator()
        try await controller.lock(grace: nil, by: admin)
        let settled = try await Self.pendingAnswer(controller)
        await controller.acknowledge(a, sequence: try await Self.nextWill(&events))
        #expect(await settled.first { _ in true } == .locked)
        #expect(await controller.answerWhenSettled(for: ObjectIdentifier(owner)) { _ in Issue.record("answered twice") } == .locked)
    }

    @Test("an unlock during the grace period answers a waiting lock at once, with the new state")
    func unlockAnswersAWaitingLock() async throws {
        _ = hub.subscribe()
        try await controller.lock(grace: nil, by: admin)
        let settled = try await Self.pendingAnswer(controller)
        try await controller.unlock(passcode: StoreFixture.secret(Self.passcode), by: admin)
        #expect(await settled.first { _ in true } == .unlocked)
    }

    @Test("a forgotten answer is never given; shutdown gives the others the current state")
    func forgottenAndShutdownAnswers() async throws {
        _ = hub.subscribe()
        try await controller.lock(grace: nil, by: admin)
        let gone = Owner()
        #expect(await controller.answerWhenSettled(for: ObjectIdentifier(gone)) { _ in Issue.record("forgotten answer given") } == nil)
        #expect(await controller.answerWhenSettled(for: ObjectIdentifier(gone)) { _ in Issue.record("forgotten answer given") } == nil)
        await controller.forgetAnswers(for: ObjectIdentifier(gone))
        let settled = try await Self.pendingAnswer(controller)
        await controller.stop()
        #expect(await settled.first { _ in true } == .locking)
    }
}
