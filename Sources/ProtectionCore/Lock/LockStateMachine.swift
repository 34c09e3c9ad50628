/// The lock/unlock life cycle as a value type: feed it events with the
/// current time, get back the actions to perform. No clocks, sockets or
/// keys inside, so every path is tested with plain instants.
///
/// ```
/// beforeFirstUnlock --unlock--> unlocked --lock(grace)--> locking --all acked / deadline--> locked
///        ^                         ^                         |                                |
///        |                         +--------unlock-----------+---------------unlock-----------+
///        +---- first-unlock timeout or shutdown (after a grace, from unlocked or locked) ------+
/// ```
/// A lock with a grace of zero goes straight to `locked`. A return to
/// `beforeFirstUnlock` is a lock that also takes class C: from `unlocked`
/// it passes through `locking`; from `locked` the state stays `locked`
/// during its grace period.
public struct LockStateMachine: Sendable {
    /// Something the owner must do, in the order given.
    public enum Action: Sendable, Equatable {
        /// Deliver this event to every subscriber.
        case emit(ProtectionEvent)
        /// Call `deadlinePassed(now:)` at this instant.
        case scheduleDeadline(ContinuousClock.Instant)
        /// Close every open class A handle and wipe its file key.
        case invalidateClassAHandles
        /// Close every open class C handle and wipe its file key.
        case invalidateClassCHandles
        /// Wipe the class A key and class B private key.
        case evictClassKeys
        /// Wipe the class C key.
        case evictClassCKey
    }

    /// What a lock request led to.
    public enum LockOutcome: Sendable, Equatable {
        /// The lock started or completed; perform the actions.
        case accepted([Action])
        /// Nothing to lock: the state is already `locked` or
        /// `beforeFirstUnlock`.
        case alreadyUnavailable
    }

    /// A lock in its grace period.
    private struct PendingLock: Sendable, Equatable {
        var deadline: ContinuousClock.Instant
        var waitingFor: Set<SubscriberID>
        /// The sequence of the latest `willBecomeUnavailable`, the only one
        /// an acknowledgement may name.
        var announcement: UInt64 = 0
        var reason: LockReason
        /// Class C goes too: the lock ends in `beforeFirstUnlock`.
        var endsBeforeFirstUnlock: Bool
    }

    private enum Phase: Sendable, Equatable {
        case beforeFirstUnlock
        case unlocked
        /// A lock from `unlocked` in its grace period (behaves as `unlocked`).
        case locking(PendingLock)
        /// `expiring`: a return to `beforeFirstUnlock` in its grace period.
        case locked(expiring: PendingLock?)
    }

    private var phase: Phase
    private var lastSequence: UInt64 = 0
    private var passcodeSet: Bool
    /// How long class C stays after the passcode was last given; nil = for ever.
    private let firstUnlockTimeout: Duration?

    /// When the first-unlock timeout passes (`firstUnlockTimeoutPassed`);
    /// nil while it does not run: no passcode, `beforeFirstUnlock`, or no timeout.
    public private(set) var firstUnlockDeadline: BootInstant?

    /// A fresh machine in `beforeFirstUnlock`, or in `unlocked` when no
    /// passcode is set (every class then behaves as `none`).
    /// `firstUnlockTimeout` (nil or ≤ 0: off) is how long after the
    /// passcode was last given the machine returns to `beforeFirstUnlock`.
    public init(passcodeSet: Bool, firstUnlockTimeout: Duration? = nil) {
        phase = passcodeSet ? .beforeFirstUnlock : .unlocked
        self.passcodeSet = passcodeSet
        self.firstUnlockTimeout = firstUnlockTimeout.flatMap { $0 > .zero ? $0 : nil }
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

    /// The end of the grace period of a lock in progress (`locking`, or
    /// `locked` on its way to `beforeFirstUnlock`).
    public var deadline: ContinuousClock.Instant? { pendingLock?.deadline }

    /// Subscribers whose acknowledgement the lock still waits for.
    public var awaitedSubscribers: Set<SubscriberID> { pendingLock?.waitingFor ?? [] }

    /// The sequence number of the last event emitted.
    public var sequence: UInt64 { lastSequence }

    /// The passcode was verified at `now`. From any state but `unlocked`
    /// this makes data available again (cancelling a lock in progress);
    /// in every state the first-unlock timeout starts again.
    public mutating func unlockSucceeded(now: BootInstant) -> [Action] {
        defer { restartFirstUnlockTimeout(now: now) }
        if phase == .unlocked { return [] }
        let first = phase == .beforeFirstUnlock
        phase = .unlocked
        return [.emit(event(.didBecomeAvailable(firstUnlock: first)))]
    }

    /// The passcode was set or changed at `now`: it was given, so the
    /// first-unlock timeout starts again (unless in `beforeFirstUnlock`).
    public mutating func passcodeGiven(now: BootInstant) {
        passcodeSet = true
        restartFirstUnlockTimeout(now: now)
    }

    /// A lock was asked for with `grace` before class A goes away.
    /// `subscribers` are those who may acknowledge; with none, or a zero
    /// grace, the lock completes at once. A lock in progress keeps its
    /// reason: another request can only bring its deadline closer.
    public mutating func lockRequested(
        grace: Duration, now: ContinuousClock.Instant, subscribers: Set<SubscriberID>,
        reason: LockReason = .requested
    ) -> LockOutcome {
        switch phase {
        case .beforeFirstUnlock, .locked:
            return .alreadyUnavailable
        case .locking(var pending):
            let sooner = min(pending.deadline, now + max(grace, .zero))
            guard sooner < pending.deadline else { return .accepted([]) }
            // Subscribers learn the new, closer deadline.
            pending.deadline = sooner
            return .accepted(announce(pending, now: now))
        case .unlocked:
            return .accepted(announce(PendingLock(deadline: now + max(grace, .zero), waitingFor: subscribers,
                                                  reason: reason, endsBeforeFirstUnlock: false), now: now))
        }
    }

    /// Back to `beforeFirstUnlock` (as a restart would leave the keys):
    /// a lock that takes class C too, after `grace` or every subscriber's
    /// acknowledgement. Widens a lock in progress (asking every subscriber
    /// again, with the closer deadline). Does nothing with no passcode or
    /// in `beforeFirstUnlock`.
    public mutating func returnToBeforeFirstUnlock(
        reason: LockReason, grace: Duration, now: ContinuousClock.Instant, subscribers: Set<SubscriberID>
    ) -> [Action] {
        guard passcodeSet else { return [] }
        firstUnlockDeadline = nil
        let deadline = now + max(grace, .zero)
        var pending = PendingLock(deadline: deadline, waitingFor: subscribers, reason: reason, endsBeforeFirstUnlock: true)
        switch phase {
        case .beforeFirstUnlock:
            return []
        case .unlocked, .locked(expiring: nil):
            break
        case .locking(let current), .locked(expiring: .some(let current)):
            pending.deadline = min(current.deadline, deadline)
        }
        return announce(pending, now: now)
    }

    /// Time passed on the boot clock (`now`); once the first-unlock timeout
    /// has passed, starts the return to `beforeFirstUnlock` (reason
    /// `inactivity`) with `grace` from `lockNow`. Early calls do nothing.
    public mutating func firstUnlockTimeoutPassed(
        now: BootInstant, grace: Duration, lockNow: ContinuousClock.Instant, subscribers: Set<SubscriberID>
    ) -> [Action] {
        guard let firstUnlockDeadline, now >= firstUnlockDeadline else { return [] }
        return returnToBeforeFirstUnlock(reason: .inactivity, grace: grace, now: lockNow, subscribers: subscribers)
    }

    /// `subscriber` acknowledged the `protectedDataWillBecomeUnavailable`
    /// with `sequence`. Only the current lock's latest one counts; any
    /// other sequence is ignored.
    public mutating func acknowledged(by subscriber: SubscriberID, sequence: UInt64) -> [Action] {
        guard pendingLock?.announcement == sequence else { return [] }
        return stopWaiting(for: subscriber)
    }

    /// Like `acknowledged(by:sequence:)` when the acknowledgement cannot
    /// complete the lock, so no action can follow: returns true once it is
    /// taken or ignored. Returns false, changing nothing, when it is the
    /// last one awaited; `acknowledged(by:sequence:)` must then take it.
    public mutating func acknowledgedWithoutCompleting(by subscriber: SubscriberID, sequence: UInt64) -> Bool {
        // No binding of the set may outlive these checks, or `stopWaiting`
        // would copy it instead of changing it in place.
        guard pendingLock?.announcement == sequence, awaitedSubscribers.contains(subscriber) else { return true }
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
        guard let deadline, now >= deadline else { return [] }
        return complete()
    }

    /// Every key was erased (crypto-shredding): no passcode is set any
    /// more, so data is available. Sequence numbers keep counting.
    public mutating func erased() -> [Action] {
        passcodeSet = false
        firstUnlockDeadline = nil
        guard phase != .unlocked else { return [] }
        phase = .unlocked
        return [.emit(event(.didBecomeAvailable(firstUnlock: false)))]
    }

    /// The daemon restarted: back to `beforeFirstUnlock` (or `unlocked`
    /// with no passcode). Sequence numbers start again.
    public mutating func restarted(passcodeSet: Bool) {
        self = LockStateMachine(passcodeSet: passcodeSet, firstUnlockTimeout: firstUnlockTimeout)
    }

    private var pendingLock: PendingLock? {
        switch phase {
        case .locking(let pending), .locked(expiring: .some(let pending)): pending
        default: nil
        }
    }

    private mutating func restartFirstUnlockTimeout(now: BootInstant) {
        firstUnlockDeadline = passcodeSet && phase != .beforeFirstUnlock ? firstUnlockTimeout.map { now + $0 } : nil
    }

    private mutating func stopWaiting(for subscriber: SubscriberID) -> [Action] {
        guard var pending = pendingLock else { return [] }
        // Drop the phase's reference first so the set changes in place: a
        // copy per acknowledgement made a lock with many subscribers quadratic.
        let fromUnlocked = state == .locking
        phase = .unlocked
        pending.waitingFor.remove(subscriber)
        phase = fromUnlocked ? .locking(pending) : .locked(expiring: pending)
        return pending.waitingFor.isEmpty ? complete() : []
    }

    /// Enters (or stays in) the grace period of `pending` with a new
    /// `willBecomeUnavailable`; completes at once when the deadline is
    /// not in the future or nobody is awaited.
    private mutating func announce(_ pending: PendingLock, now: ContinuousClock.Instant) -> [Action] {
        var pending = pending
        pending.announcement = lastSequence + 1
        switch phase {
        case .unlocked, .locking: phase = .locking(pending)
        case .locked, .beforeFirstUnlock: phase = .locked(expiring: pending)
        }
        let announcement = Action.emit(event(.willBecomeUnavailable(deadline: pending.deadline), reason: pending.reason))
        if pending.deadline <= now || pending.waitingFor.isEmpty { return [announcement] + complete() }
        return [announcement, .scheduleDeadline(pending.deadline)]
    }

    private mutating func complete() -> [Action] {
        guard let pending = pendingLock else { return [] }
        guard pending.endsBeforeFirstUnlock else {
            phase = .locked(expiring: nil)
            return [.invalidateClassAHandles, .evictClassKeys, .emit(event(.didBecomeUnavailable, reason: pending.reason))]
        }
        phase = .beforeFirstUnlock
        firstUnlockDeadline = nil
        return [.invalidateClassAHandles, .invalidateClassCHandles, .evictClassKeys, .evictClassCKey,
                .emit(event(.didBecomeUnavailable, reason: pending.reason))]
    }

    private mutating func event(_ kind: ProtectionEvent.Kind, reason: LockReason? = nil) -> ProtectionEvent {
        lastSequence += 1
        return ProtectionEvent(kind: kind, sequence: lastSequence, state: state, reason: reason)
    }
}
