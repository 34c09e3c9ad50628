import ProtectionCore
import Testing

@Suite("Lock state machine, driven with explicit instants")
struct LockStateMachineTests {
    let t0 = ContinuousClock.now
    /// An instant on the boot clock, for unlocks.
    let b0 = BootInstant(sinceBoot: .seconds(1_000))
    let alice = SubscriberID(1)
    let bob = SubscriberID(2)

    private func events(_ actions: [LockStateMachine.Action]) -> [ProtectionEvent] {
        actions.compactMap { if case .emit(let event) = $0 { event } else { nil } }
    }

    private func unlockedMachine() -> LockStateMachine {
        var machine = LockStateMachine(passcodeSet: true)
        _ = machine.unlockSucceeded(now: b0)
        return machine
    }

    @Test("a machine with a passcode starts before first unlock; without one it starts unlocked")
    func initialStates() {
        #expect(LockStateMachine(passcodeSet: true).state == .beforeFirstUnlock)
        #expect(LockStateMachine(passcodeSet: false).state == .unlocked)
    }

    @Test("the first unlock emits didBecomeAvailable flagged as first, later ones are not")
    func firstUnlockFlag() {
        var machine = LockStateMachine(passcodeSet: true)
        let first = events(machine.unlockSucceeded(now: b0))
        #expect(first == [ProtectionEvent(kind: .didBecomeAvailable(firstUnlock: true), sequence: 1, state: .unlocked)])
        guard case .accepted = machine.lockRequested(grace: .zero, now: t0, subscribers: []) else {
            Issue.record("lock refused"); return
        }
        let second = events(machine.unlockSucceeded(now: b0))
        #expect(second.map(\.kind) == [.didBecomeAvailable(firstUnlock: false)])
        #expect(second.first?.sequence == 4)
    }

    @Test("a lock with grace waits for the deadline, then invalidates class A handles, evicts keys and emits didBecomeUnavailable")
    func lockWithGraceCompletesAtDeadline() {
        var machine = unlockedMachine()
        guard case .accepted(let actions) = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice]) else {
            Issue.record("lock refused"); return
        }
        #expect(actions == [
            .emit(ProtectionEvent(kind: .willBecomeUnavailable(deadline: t0 + .seconds(10)), sequence: 2, state: .locking,
                                  reason: .requested)),
            .scheduleDeadline(t0 + .seconds(10)),
        ])
        #expect(machine.state == .locking)
        #expect(machine.deadlinePassed(now: t0 + .seconds(9)).isEmpty)
        #expect(machine.state == .locking)
        #expect(machine.deadlinePassed(now: t0 + .seconds(10)) == [
            .invalidateClassAHandles, .evictClassKeys,
            .emit(ProtectionEvent(kind: .didBecomeUnavailable, sequence: 3, state: .locked, reason: .requested)),
        ])
        #expect(machine.state == .locked)
    }

    @Test("the lock completes as soon as every subscriber acknowledged")
    func acknowledgementsCompleteTheLock() {
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice, bob])
        let will = machine.sequence
        #expect(machine.acknowledged(by: alice, sequence: will).isEmpty)
        #expect(machine.awaitedSubscribers == [bob])
        #expect(events(machine.acknowledged(by: bob, sequence: will)).map(\.kind) == [.didBecomeUnavailable])
        #expect(machine.state == .locked)
    }

    @Test("only the latest willBecomeUnavailable's sequence counts as an acknowledgement")
    func staleAcknowledgementsIgnored() {
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice, bob])
        let first = machine.sequence
        _ = machine.lockRequested(grace: .seconds(5), now: t0, subscribers: [])
        let second = machine.sequence
        #expect(second == first + 1)
        #expect(machine.acknowledged(by: alice, sequence: first).isEmpty)
        #expect(machine.acknowledged(by: alice, sequence: second + 1).isEmpty)
        #expect(machine.awaitedSubscribers == [alice, bob])
        #expect(machine.acknowledged(by: alice, sequence: second).isEmpty)
        #expect(machine.awaitedSubscribers == [bob])
    }

    @Test("an acknowledgement is taken without completing unless it is the last one awaited")
    func acknowledgedWithoutCompleting() {
        var machine = unlockedMachine()
        func take(_ subscriber: SubscriberID, _ sequence: UInt64) -> Bool {
            machine.acknowledgedWithoutCompleting(by: subscriber, sequence: sequence)
        }
        #expect(take(alice, 1))
        _ = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice, bob])
        let will = machine.sequence
        #expect(take(alice, will - 1))
        #expect(machine.awaitedSubscribers == [alice, bob])
        #expect(take(alice, will))
        #expect(machine.awaitedSubscribers == [bob])
        #expect(take(alice, will))
        #expect(!take(bob, will))
        #expect(machine.awaitedSubscribers == [bob])
        #expect(machine.state == .locking)
        #expect(events(machine.acknowledged(by: bob, sequence: will)).map(\.kind) == [.didBecomeUnavailable])
    }

    @Test("a subscriber that leaves no longer holds up the lock")
    func leavingSubscriberCounts() {
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice, bob])
        _ = machine.acknowledged(by: alice, sequence: machine.sequence)
        #expect(events(machine.subscriberLeft(bob)).map(\.kind) == [.didBecomeUnavailable])
    }

    @Test("a zero grace period locks at once with will then did events")
    func zeroGraceLocksImmediately() {
        var machine = unlockedMachine()
        guard case .accepted(let actions) = machine.lockRequested(grace: .zero, now: t0, subscribers: [alice]) else {
            Issue.record("lock refused"); return
        }
        #expect(events(actions).map(\.kind) == [.willBecomeUnavailable(deadline: t0), .didBecomeUnavailable])
        #expect(actions.contains(.evictClassKeys))
        #expect(machine.state == .locked)
    }

    @Test("with no subscribers a lock completes at once whatever the grace")
    func noSubscribersLockImmediately() {
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [])
        #expect(machine.state == .locked)
    }

    @Test("unlocking during the grace period cancels the lock")
    func unlockCancelsLocking() {
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice])
        #expect(events(machine.unlockSucceeded(now: b0)).map(\.kind) == [.didBecomeAvailable(firstUnlock: false)])
        #expect(machine.state == .unlocked)
        #expect(machine.deadlinePassed(now: t0 + .seconds(11)).isEmpty)
        #expect(machine.state == .unlocked)
    }

    @Test("a second lock request can only bring the deadline closer")
    func secondRequestShortensDeadline() {
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice])
        #expect(machine.lockRequested(grace: .seconds(30), now: t0 + .seconds(1), subscribers: []) == .accepted([]))
        #expect(machine.deadline == t0 + .seconds(10))
        #expect(machine.lockRequested(grace: .seconds(2), now: t0 + .seconds(1), subscribers: []) == .accepted([
            .emit(ProtectionEvent(kind: .willBecomeUnavailable(deadline: t0 + .seconds(3)), sequence: 3, state: .locking,
                                  reason: .requested)),
            .scheduleDeadline(t0 + .seconds(3)),
        ]))
        #expect(machine.deadline == t0 + .seconds(3))
    }

    @Test("locking before first unlock or when locked has nothing to do")
    func lockWhenUnavailable() {
        var fresh = LockStateMachine(passcodeSet: true)
        #expect(fresh.lockRequested(grace: .zero, now: t0, subscribers: []) == .alreadyUnavailable)
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .zero, now: t0, subscribers: [])
        #expect(machine.lockRequested(grace: .zero, now: t0, subscribers: []) == .alreadyUnavailable)
    }

    @Test("sequence numbers increase by one per event and every event carries the resulting state")
    func sequenceNumbers() {
        var machine = LockStateMachine(passcodeSet: true)
        var all: [ProtectionEvent] = events(machine.unlockSucceeded(now: b0))
        for round in 0..<3 {
            if case .accepted(let actions) = machine.lockRequested(grace: .seconds(5), now: t0, subscribers: [alice]) {
                all += events(actions)
            }
            all += events(round.isMultiple(of: 2) ? machine.acknowledged(by: alice, sequence: machine.sequence) : machine.deadlinePassed(now: t0 + .seconds(5)))
            all += events(machine.unlockSucceeded(now: b0))
        }
        #expect(all.map(\.sequence) == Array(1...UInt64(all.count)))
        #expect(all.count == 10)
        for event in all {
            switch event.kind {
            case .willBecomeUnavailable: #expect(event.state == .locking)
            case .didBecomeUnavailable: #expect(event.state == .locked)
            case .didBecomeAvailable: #expect(event.state == .unlocked)
            }
        }
    }

    @Test("an erase makes data available again without resetting sequence numbers")
    func eraseKeepsCounting() {
        var machine = unlockedMachine()
        _ = machine.lockRequested(grace: .zero, now: t0, subscribers: [])
        #expect(events(machine.erased()) == [
            ProtectionEvent(kind: .didBecomeAvailable(firstUnlock: false), sequence: 4, state: .unlocked),
        ])
        #expect(machine.erased().isEmpty)
    }

    @Test("a restart returns to before first unlock and restarts sequence numbers")
    func restartResets() {
        var machine = unlockedMachine()
        machine.restarted(passcodeSet: true)
        #expect(machine.state == .beforeFirstUnlock)
        #expect(machine.sequence == 0)
        #expect(events(machine.unlockSucceeded(now: b0)).map(\.kind) == [.didBecomeAvailable(firstUnlock: true)])
    }

    @Test("a lock carries the reason it was asked with; a closer deadline keeps it")
    func lockReasons() {
        var machine = unlockedMachine()
        guard case .accepted(let first) = machine.lockRequested(grace: .seconds(10), now: t0, subscribers: [alice],
                                                                 reason: .suspend) else {
            Issue.record("lock refused"); return
        }
        guard case .accepted(let closer) = machine.lockRequested(grace: .zero, now: t0 + .seconds(1), subscribers: [],
                                                                  reason: .requested) else {
            Issue.record("lock refused"); return
        }
        #expect(events(first + closer).map(\.reason) == [.suspend, .suspend, .suspend])
        #expect(events(first + closer).map(\.state) == [.locking, .locking, .locked])
        #expect(events(machine.unlockSucceeded(now: b0)).map(\.reason) == [nil])
    }

    /// A machine with a first-unlock timeout, unlocked at `b0`.
    private func machineWithTimeout(_ timeout: Duration = .seconds(72 * 3600)) -> LockStateMachine {
        var machine = LockStateMachine(passcodeSet: true, firstUnlockTimeout: timeout)
        _ = machine.unlockSucceeded(now: b0)
        return machine
    }

    @Test("the first-unlock timeout counts on the boot clock from the last unlock; each unlock starts it again")
    func firstUnlockTimeoutRestartsOnUnlock() {
        var machine = machineWithTimeout(.seconds(100))
        #expect(machine.firstUnlockDeadline == b0 + .seconds(100))
        #expect(machine.unlockSucceeded(now: b0 + .seconds(60)).isEmpty)
        #expect(machine.firstUnlockDeadline == b0 + .seconds(160))
        #expect(machine.firstUnlockTimeoutPassed(now: b0 + .seconds(159), grace: .zero, lockNow: t0, subscribers: []).isEmpty)
        #expect(machine.state == .unlocked)
        #expect(!machine.firstUnlockTimeoutPassed(now: b0 + .seconds(160), grace: .zero, lockNow: t0, subscribers: []).isEmpty)
        #expect(machine.state == .beforeFirstUnlock)
        #expect(machine.firstUnlockDeadline == nil)
        #expect(machine.firstUnlockTimeoutPassed(now: b0 + .seconds(999), grace: .zero, lockNow: t0, subscribers: []).isEmpty)
    }

    @Test("after the timeout an unlocked machine goes back to beforeFirstUnlock once the grace ends, wiping class A, B private and C")
    func firstUnlockTimeoutFromUnlocked() {
        var machine = machineWithTimeout()
        let passed = b0 + .seconds(72 * 3600)
        #expect(machine.firstUnlockTimeoutPassed(now: passed, grace: .seconds(10), lockNow: t0, subscribers: [alice]) == [
            .emit(ProtectionEvent(kind: .willBecomeUnavailable(deadline: t0 + .seconds(10)), sequence: 2, state: .locking,
                                  reason: .inactivity)),
            .scheduleDeadline(t0 + .seconds(10)),
        ])
        #expect(machine.state == .locking)
        #expect(machine.deadlinePassed(now: t0 + .seconds(9)).isEmpty)
        #expect(machine.deadlinePassed(now: t0 + .seconds(10)) == [
            .invalidateClassAHandles, .invalidateClassCHandles, .evictClassKeys, .evictClassCKey,
            .emit(ProtectionEvent(kind: .didBecomeUnavailable, sequence: 3, state: .beforeFirstUnlock, reason: .inactivity)),
        ])
        #expect(machine.state == .beforeFirstUnlock)
        #expect(machine.lockRequested(grace: .zero, now: t0, subscribers: []) == .alreadyUnavailable)
        #expect(events(machine.unlockSucceeded(now: passed)).map(\.kind) == [.didBecomeAvailable(firstUnlock: true)])
        #expect(machine.firstUnlockDeadline == passed + .seconds(72 * 3600))
    }

    @Test("the return to beforeFirstUnlock ends early once every subscriber acknowledged, as a lock does")
    func firstUnlockTimeoutAcknowledged() {
        var machine = machineWithTimeout()
        _ = machine.firstUnlockTimeoutPassed(now: b0 + .seconds(72 * 3600), grace: .seconds(10), lockNow: t0,
                                             subscribers: [alice, bob])
        let will = machine.sequence
        #expect(machine.acknowledged(by: alice, sequence: will).isEmpty)
        let taken = machine.acknowledgedWithoutCompleting(by: bob, sequence: will)
        #expect(!taken, "the last acknowledgement must complete the return")
        #expect(events(machine.acknowledged(by: bob, sequence: will)).map(\.state) == [.beforeFirstUnlock])
    }

    @Test("from locked the state stays locked during the grace, then is beforeFirstUnlock; class A is gone already")
    func firstUnlockTimeoutFromLocked() {
        var machine = machineWithTimeout()
        _ = machine.lockRequested(grace: .zero, now: t0, subscribers: [])
        #expect(machine.firstUnlockDeadline == b0 + .seconds(72 * 3600), "a lock does not stop the timeout")
        let actions = machine.firstUnlockTimeoutPassed(now: b0 + .seconds(72 * 3600), grace: .seconds(10), lockNow: t0,
                                                       subscribers: [alice])
        #expect(events(actions) == [
            ProtectionEvent(kind: .willBecomeUnavailable(deadline: t0 + .seconds(10)), sequence: 4, state: .locked,
                            reason: .inactivity),
        ])
        #expect(machine.state == .locked)
        #expect(machine.deadline == t0 + .seconds(10))
        #expect(machine.lockRequested(grace: .zero, now: t0, subscribers: []) == .alreadyUnavailable)
        let completion = machine.subscriberLeft(alice)
        #expect(completion.contains(.evictClassCKey) && completion.contains(.invalidateClassCHandles))
        #expect(events(completion).map(\.state) == [.beforeFirstUnlock])
    }

    @Test("a timeout during a lock's grace widens it to beforeFirstUnlock and asks every subscriber again")
    func firstUnlockTimeoutWidensLock() {
        var machine = machineWithTimeout()
        _ = machine.lockRequested(grace: .seconds(30), now: t0, subscribers: [alice, bob])
        _ = machine.acknowledged(by: alice, sequence: machine.sequence)
        #expect(machine.awaitedSubscribers == [bob])
        let widened = machine.firstUnlockTimeoutPassed(now: b0 + .seconds(72 * 3600), grace: .seconds(10),
                                                       lockNow: t0 + .seconds(5), subscribers: [alice, bob])
        #expect(widened == [
            .emit(ProtectionEvent(kind: .willBecomeUnavailable(deadline: t0 + .seconds(15)), sequence: 3, state: .locking,
                                  reason: .inactivity)),
            .scheduleDeadline(t0 + .seconds(15)),
        ])
        #expect(machine.awaitedSubscribers == [alice, bob])
        #expect(events(machine.deadlinePassed(now: t0 + .seconds(15))).map(\.state) == [.beforeFirstUnlock])
    }

    @Test("an unlock during the grace cancels the return to beforeFirstUnlock and starts the timeout again")
    func unlockCancelsReturn() {
        var machine = machineWithTimeout(.seconds(100))
        _ = machine.firstUnlockTimeoutPassed(now: b0 + .seconds(100), grace: .seconds(10), lockNow: t0, subscribers: [alice])
        #expect(events(machine.unlockSucceeded(now: b0 + .seconds(105))).map(\.kind) == [.didBecomeAvailable(firstUnlock: false)])
        #expect(machine.state == .unlocked)
        #expect(machine.deadlinePassed(now: t0 + .seconds(10)).isEmpty)
        #expect(machine.firstUnlockDeadline == b0 + .seconds(205))
    }

    @Test("the timeout does not run without a passcode, when off, or before first unlock; a passcode set starts it, an erase stops it")
    func firstUnlockTimeoutOnlyWithPasscode() {
        let timeout = Duration.seconds(100)
        var noPasscode = LockStateMachine(passcodeSet: false, firstUnlockTimeout: timeout)
        #expect(noPasscode.unlockSucceeded(now: b0).isEmpty)
        #expect(noPasscode.firstUnlockDeadline == nil)
        #expect(noPasscode.returnToBeforeFirstUnlock(reason: .shutdown, grace: .zero, now: t0, subscribers: []).isEmpty)
        noPasscode.passcodeGiven(now: b0)
        #expect(noPasscode.firstUnlockDeadline == b0 + timeout)
        #expect(noPasscode.erased().isEmpty)
        #expect(noPasscode.firstUnlockDeadline == nil)

        var off = LockStateMachine(passcodeSet: true, firstUnlockTimeout: .zero)
        _ = off.unlockSucceeded(now: b0)
        #expect(off.firstUnlockDeadline == nil)

        var fresh = LockStateMachine(passcodeSet: true, firstUnlockTimeout: timeout)
        fresh.passcodeGiven(now: b0)
        #expect(fresh.firstUnlockDeadline == nil, "a passcode change before first unlock brings no key back")
        #expect(fresh.firstUnlockTimeoutPassed(now: b0 + timeout, grace: .zero, lockNow: t0, subscribers: []).isEmpty)
        #expect(fresh.state == .beforeFirstUnlock)
    }

    @Test("a shutdown goes back to beforeFirstUnlock at once with reason shutdown, from unlocked or locked")
    func shutdownReturns() {
        for lockedFirst in [false, true] {
            var machine = unlockedMachine()
            if lockedFirst { _ = machine.lockRequested(grace: .zero, now: t0, subscribers: []) }
            let actions = machine.returnToBeforeFirstUnlock(reason: .shutdown, grace: .zero, now: t0, subscribers: [alice])
            #expect(events(actions).map(\.reason) == [.shutdown, .shutdown])
            #expect(events(actions).map(\.state) == [lockedFirst ? .locked : .locking, .beforeFirstUnlock])
            #expect(actions.contains(.evictClassCKey))
            #expect(machine.returnToBeforeFirstUnlock(reason: .shutdown, grace: .zero, now: t0, subscribers: []).isEmpty)
        }
    }
}
