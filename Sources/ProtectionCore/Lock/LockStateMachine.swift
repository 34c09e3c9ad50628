/// The lock/unlock life cycle as a value type: feed it events with the
/// current time, get back the actions to perform. No clocks, sockets or
/// keys inside, so every path is tested with plain instants.
///
/// ```
/// beforeFirstUnlock --unlock--> unlocked --lock(grace)--> locking --all acked / deadline--> locked
///                                  ^                         |                                |
///                                  +--------unlock-----------+---------------unlock-----------+
/// ```
/// A lock with a grace of zero goes straight to `locked`.
public struct LockStateMachine: Sendable {
    /// Something the owner must do, in the order given.
    public enum Action: Sendable, Equatable {
        /// Deliver this event to every subscriber.
        case emit(ProtectionEvent)
        /// Call `deadlinePassed(now:)` at this instant.
        case scheduleDeadline(ContinuousClock.Instant)
        /// Close every open class A handle and wipe its file key.
        case invalidateClassAHandles
        /// Wipe the class A key and class B private key.
        case evictClassKeys
    }

    /// What a lock request led to.
    public enum LockOutcome: Sendable, Equatable {
        /// The lock started or completed; perform the actions.
        case accepted([Action])
        /// Nothing to lock: the state is already `locked` or
        /// `beforeFirstUnlock`.
        case alreadyUnavailable
    }

    private enum Phase: Sendable, Equatable {
        case beforeFirstUnlock
        case unlocked
        /// `announcement` is the sequence of the latest `willBecomeUnavailable`,
        /// the only one an acknowledgement may name.
        case locking(deadline: ContinuousClock.Instant, waitingFor: Set<SubscriberID>, announcement: UInt64)
        case locked
    }

    private var phase: Phase
    private var lastSequence: UInt64 = 0
    private var hasBeenUnlocked = false

    /// A fresh machine in `beforeFirstUnlock`, or in `unlocked` when no
    /// passcode is set (every class then behaves as `none`).
    public init(passcodeSet: Bool) {
        phase = passcodeSet ? .beforeFirstUnlock : .unlocked
        hasBeenUnlocked = !passcodeSet
    }

    /// The current state.
    public var state: LockState {
        switch phase {
        case .beforeFirstUnlock: .beforeFirstUnlock
        case .unlocked: .unlocked
        case .locking: .locking
        case .locked: .locked
        }
    }

    /// The end of the grace period while `locking`.
    public var deadline: ContinuousClock.Instant? {
        if case .locking(let deadline, _, _) = phase { return deadline }
        return nil
    }

    /// Subscribers whose acknowledgement the lock still waits for.
    public var awaitedSubscribers: Set<SubscriberID> {
        if case .locking(_, let waiting, _) = phase { return waiting }
        return []
    }

    /// The sequence number of the last event emitted.
    public var sequence: UInt64 { lastSequence }

    /// The passcode was verified. From any state but `unlocked` this makes
    /// data available again (cancelling a lock in progress).
    public mutating func unlockSucceeded() -> [Action] {
        if phase == .unlocked { return [] }
        let first = !hasBeenUnlocked
        hasBeenUnlocked = true
        phase = .unlocked
        return [.emit(event(.didBecomeAvailable(firstUnlock: first)))]
    }

    /// A lock was asked for with `grace` before class A goes away.
    /// `subscribers` are those who may acknowledge; with none, or a zero
    /// grace, the lock completes at once.
    public mutating func lockRequested(
        grace: Duration, now: ContinuousClock.Instant, subscribers: Set<SubscriberID>
    ) -> LockOutcome {
        switch phase {
        case .beforeFirstUnlock, .locked:
            return .alreadyUnavailable
        case .locking(let deadline, let waiting, _):
            // A second request can only bring the deadline closer.
            let sooner = min(deadline, now + max(grace, .zero))
            guard sooner < deadline else { return .accepted([]) }
            // Subscribers learn the new, closer deadline.
            let announcement = announce(deadline: sooner, waitingFor: waiting)
            if sooner <= now { return .accepted([.emit(announcement)] + complete()) }
            return .accepted([.emit(announcement), .scheduleDeadline(sooner)])
        case .unlocked:
            let deadline = now + max(grace, .zero)
            let announcement = announce(deadline: deadline, waitingFor: subscribers)
            var actions: [Action] = [.emit(announcement)]
            if grace <= .zero || subscribers.isEmpty {
                actions += complete()
            } else {
                actions.append(.scheduleDeadline(deadline))
            }
            return .accepted(actions)
        }
    }

    /// `subscriber` acknowledged the `protectedDataWillBecomeUnavailable`
    /// with `sequence`. Only the current lock's latest one counts; any
    /// other sequence is ignored.
    public mutating func acknowledged(by subscriber: SubscriberID, sequence: UInt64) -> [Action] {
        guard case .locking(_, _, let announcement) = phase, sequence == announcement else { return [] }
        return stopWaiting(for: subscriber)
    }

    /// Like `acknowledged(by:sequence:)` when the acknowledgement cannot
    /// complete the lock, so no action can follow: returns true once it is
    /// taken or ignored. Returns false, changing nothing, when it is the
    /// last one awaited; `acknowledged(by:sequence:)` must then take it.
    public mutating func acknowledgedWithoutCompleting(by subscriber: SubscriberID, sequence: UInt64) -> Bool {
        // No binding of the set may outlive these checks, or `stopWaiting`
        // would copy it instead of changing it in place.
        guard case .locking(_, _, let announcement) = phase, sequence == announcement,
              awaitedSubscribers.contains(subscriber) else { return true }
        guard awaitedSubscribers.count > 1 else { return false }
        _ = stopWaiting(for: subscriber)
        return true
    }

    /// `subscriber` disconnected: it no longer holds up a lock.
    public mutating func subscriberLeft(_ subscriber: SubscriberID) -> [Action] {
        stopWaiting(for: subscriber)
    }

    /// Time passed; completes the lock once its deadline is reached.
    /// Early or stale calls do nothing.
    public mutating func deadlinePassed(now: ContinuousClock.Instant) -> [Action] {
        guard case .locking(let deadline, _, _) = phase, now >= deadline else { return [] }
        return complete()
    }

    /// Every key was erased (crypto-shredding): no passcode is set any
    /// more, so data is available. Sequence numbers keep counting.
    public mutating func erased() -> [Action] {
        guard phase != .unlocked else { return [] }
        hasBeenUnlocked = true
        phase = .unlocked
        return [.emit(event(.didBecomeAvailable(firstUnlock: false)))]
    }

    /// The daemon restarted: back to `beforeFirstUnlock` (or `unlocked`
    /// with no passcode). Sequence numbers start again.
    public mutating func restarted(passcodeSet: Bool) {
        self = LockStateMachine(passcodeSet: passcodeSet)
    }

    private mutating func stopWaiting(for subscriber: SubscriberID) -> [Action] {
        guard case .locking(let deadline, var waiting, let announcement) = phase else { return [] }
        // Drop the phase's reference first so the set changes in place: a
        // copy per acknowledgement made a lock with many subscribers quadratic.
        phase = .locked
        waiting.remove(subscriber)
        phase = .locking(deadline: deadline, waitingFor: waiting, announcement: announcement)
        return waiting.isEmpty ? complete() : []
    }

    /// Enters (or stays in) `locking` and makes its `willBecomeUnavailable`.
    private mutating func announce(
        deadline: ContinuousClock.Instant, waitingFor waiting: Set<SubscriberID>
    ) -> ProtectionEvent {
        phase = .locking(deadline: deadline, waitingFor: waiting, announcement: lastSequence + 1)
        return event(.willBecomeUnavailable(deadline: deadline))
    }

    private mutating func complete() -> [Action] {
        phase = .locked
        return [.invalidateClassAHandles, .evictClassKeys, .emit(event(.didBecomeUnavailable))]
    }

    private mutating func event(_ kind: ProtectionEvent.Kind) -> ProtectionEvent {
        lastSequence += 1
        return ProtectionEvent(kind: kind, sequence: lastSequence, state: state)
    }
}
