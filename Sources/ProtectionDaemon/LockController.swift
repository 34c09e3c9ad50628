public import Logging
public import ProtectionCore
internal import ProtectionWire
internal import Sodium

/// Drives the store's lock life cycle in real time: starts locks, runs the
/// grace-period and first-unlock timers, takes acknowledgements, unlocks,
/// returns to `beforeFirstUnlock` at shutdown, and publishes every
/// resulting event through the hub. Audit lines for lock, unlock, the
/// recovery key and failed attempts are logged here (never a passcode or
/// key).
public actor LockController {
    private let store: ProtectedStore
    private let hub: EventHub
    private let defaultGrace: Duration
    private let logger: Logger
    /// The end of a lock's grace period.
    private var graceAlarm = Alarm<ContinuousClock.Instant>()
    /// When the first-unlock timeout passes.
    private var firstUnlockAlarm = Alarm<BootInstant>()
    /// Set by `stop()`: no alarm is set again.
    private var stopped = false
    /// What to call once the state leaves `locking`, by who asked (see
    /// `answerWhenSettled`).
    private var settledAnswers: [ObjectIdentifier: [@Sendable (LockState) -> Void]] = [:]

    /// Makes a controller over `store`, publishing to `hub`.
    public init(store: ProtectedStore, hub: EventHub, defaultGrace: Duration, logger: Logger) {
        self.store = store
        self.hub = hub
        self.defaultGrace = defaultGrace
        self.logger = logger
    }

    /// The configured grace period, also that of a return to
    /// `beforeFirstUnlock` after the first-unlock timeout.
    public nonisolated var gracePeriod: Duration { defaultGrace }

    /// The longest the first-unlock timer sleeps before it reads the boot
    /// clock again, in case a sleep does not count a suspend.
    static let firstUnlockCheckInterval: Duration = .seconds(60)

    /// Starts a lock (already authorised by the caller).
    func lock(grace: Duration?, reason: LockReason = .requested, by peer: PeerCredentials) throws {
        let grace = grace ?? defaultGrace
        let progress = try store.requestLock(grace: grace, now: .now, subscribers: hub.subscriberIDs, reason: reason)
        logger.notice("lock requested", metadata: ["protd.peer.uid": "\(peer.uid)", "protd.peer.pid": "\(peer.pid)",
                                                    "protd.lock.grace_ms": "\(grace.milliseconds)",
                                                    "protd.lock.reason": "\(reason)"])
        publish(progress.events)
    }

    /// protd is stopping: back to `beforeFirstUnlock` at once (reason
    /// `shutdown`, no grace: every connection ends next whatever
    /// subscribers do), so subscribers hear why before their connections close.
    func shutdownStarted() {
        publish(store.returnToBeforeFirstUnlock(reason: .shutdown, grace: .zero).events)
    }

    /// The state a lock-and-wait is answered with now, or nil when it is
    /// `locking`: `answer` is then kept, for `owner`, and called with the
    /// state once it is no longer `locking` (`locked`, or another state when
    /// an unlock or erase cancelled the lock). It is called on the
    /// controller before the events that settled the lock are broadcast,
    /// so a lock's answer does not wait behind its fan-out to every
    /// subscriber; it must not block.
    func answerWhenSettled(
        for owner: ObjectIdentifier, _ answer: @escaping @Sendable (LockState) -> Void
    ) -> LockState? {
        guard store.lockState == .locking else { return store.lockState }
        settledAnswers[owner, default: []].append(answer)
        return nil
    }

    /// Drops `owner`'s pending answers (its connection ended).
    func forgetAnswers(for owner: ObjectIdentifier) {
        settledAnswers.removeValue(forKey: owner)
    }

    /// Unlocks with `passcode` (rate-limited by the key bag).
    func unlock(passcode: SecretBytes, countedAgainst counter: AttemptCounter = .machine,
                by peer: PeerCredentials) throws {
        var login: Logger.Metadata = [:]
        if case .login(let uid) = counter { login["protd.login.uid"] = "\(uid)" }
        publish(try audited(.unlock, by: peer, metadata: login) {
            try store.unlock(passcode: passcode, countedAgainst: counter)
        })
    }

    /// Sets or changes the passcode (already authorised).
    func changePasscode(_ new: SecretBytes, old: SecretBytes?, by peer: PeerCredentials) throws {
        try audited(.passwd, by: peer) { try store.setPasscode(new, old: old) }
        // A first passcode (or a change) starts the first-unlock timeout.
        setAlarms()
    }

    /// Makes a recovery key, given the passcode (already authorised;
    /// counted like an unlock). The caller sends it once and wipes it.
    func createRecoveryKey(passcode: SecretBytes, by peer: PeerCredentials) throws -> SecretBytes {
        try audited(.recoveryCreate, by: peer) { try store.createRecoveryKey(passcode: passcode) }
    }

    /// Deletes the recovery key (already authorised).
    func removeRecoveryKey(by peer: PeerCredentials) throws {
        try audited(.recoveryRemove, by: peer) { try store.removeRecoveryKey() }
    }

    /// Sets `new` as the passcode with the recovery key (counted like an
    /// unlock) and unlocks.
    func resetPasscode(recoveryKey: SecretBytes, new: SecretBytes, by peer: PeerCredentials) throws {
        publish(try audited(.recoveryReset, by: peer) { try store.resetPasscode(recoveryKey: recoveryKey, new: new) })
    }

    /// What `audited` logs.
    private enum AuditedAction: String {
        case unlock, passwd, recoveryCreate = "recovery.create", recoveryRemove = "recovery.remove"
        case recoveryReset = "recovery.reset"

        var succeeded: String {
            switch self {
            case .unlock: "unlock succeeded"
            case .passwd: "passcode changed"
            case .recoveryCreate: "recovery key created"
            case .recoveryRemove: "recovery key removed"
            case .recoveryReset: "passcode reset with the recovery key"
            }
        }

        var failed: String {
            switch self {
            case .unlock: "unlock failed"
            case .passwd: "passcode change refused"
            case .recoveryCreate: "recovery key refused"
            case .recoveryRemove: "recovery key removal failed"
            case .recoveryReset: "passcode reset with the recovery key failed"
            }
        }
    }

    /// Runs a store call for `peer` and logs its outcome: who, and on
    /// failure the error code (`protd.<action>.result`) and the
    /// failed-attempt count; never a secret. After a failure it publishes
    /// what an erase-after-N left undelivered.
    private func audited<R>(_ action: AuditedAction, by peer: PeerCredentials, metadata extra: Logger.Metadata = [:],
                            _ body: () throws -> R) throws -> R {
        let metadata = extra.merging(["protd.peer.uid": "\(peer.uid)", "protd.peer.pid": "\(peer.pid)"]) { $1 }
        do {
            let result = try body()
            logger.notice("\(action.succeeded)", metadata: metadata)
            return result
        } catch {
            let code = (error as? ProtectionError).map { "\($0.code.rawValue)" } ?? "\(type(of: error))"
            var failure = metadata
            failure["protd.\(action.rawValue).result"] = "\(code)"
            failure["protd.unlock.failed_attempts"] = "\(store.status.failedAttempts)"
            logger.warning("\(action.failed)", metadata: failure)
            if (error as? ProtectionError)?.code == .erasedAfterFailedAttempts {
                logger.critical("every key was erased after too many failed attempts", metadata: metadata)
            }
            publish(store.takeUndeliveredEvents())
            throw error
        }
    }

    /// Crypto-shreds everything (already authorised).
    func erase(by peer: PeerCredentials) throws {
        // An erase whose file removal failed still happened: its events wait in the store.
        defer { publish(store.takeUndeliveredEvents()) }
        let events = try store.erase()
        logger.critical("erased every key and file", metadata: ["protd.peer.uid": "\(peer.uid)"])
        publish(events)
    }

    /// A subscriber acknowledged the `willBecomeUnavailable` event with
    /// `sequence`; only the current lock's latest one counts. The last
    /// awaited acknowledgement completes the lock at once.
    func acknowledge(_ subscriber: SubscriberID, sequence: UInt64) {
        publish(store.acknowledge(subscriber, sequence: sequence).events)
    }

    /// `acknowledge` without waiting, from any thread (an event loop):
    /// every acknowledgement but the last is taken by the store here and
    /// now; the last, which completes the lock, goes on to the actor.
    nonisolated func takeAcknowledgement(_ subscriber: SubscriberID, sequence: UInt64) {
        guard !store.acknowledgeUnlessLast(subscriber, sequence: sequence) else { return }
        Task { await acknowledge(subscriber, sequence: sequence) }
    }

    /// A subscriber went away: the lock no longer waits for it.
    func subscriberLeft(_ subscriber: SubscriberID) {
        publish(store.subscriberLeft(subscriber).events)
    }

    /// Stops the timers and gives every pending answer the current state
    /// (shutdown).
    func stop() {
        stopped = true
        graceAlarm.cancel()
        firstUnlockAlarm.cancel()
        answerPending()
    }

    private func deadlineReached() {
        graceAlarm.rang()
        publish(store.deadlinePassed(now: .now).events)
    }

    private func firstUnlockTimeoutReached() {
        firstUnlockAlarm.rang()
        let progress = store.firstUnlockTimeoutPassed(grace: defaultGrace, subscribers: hub.subscriberIDs)
        if !progress.events.isEmpty {
            logger.notice("first-unlock timeout passed: returning to beforeFirstUnlock",
                          metadata: ["protd.lock.grace_ms": "\(defaultGrace.milliseconds)"])
        }
        publish(progress.events)
    }

    /// Logs a completed lock, settles it if it is no longer `locking`, sets
    /// the alarms for what is pending, then broadcasts `events`. Pending
    /// lock answers go first, written to their event loops before the
    /// broadcast, so they do not queue behind one event frame per subscriber.
    private func publish(_ events: [ProtectionEvent]) {
        for event in events where event.kind == .didBecomeUnavailable {
            let what = event.state == .beforeFirstUnlock
                ? "back to beforeFirstUnlock: class A, B private and C keys wiped"
                : "lock completed: class A keys and class B private key wiped"
            logger.notice("\(what)", metadata: ["protd.event.sequence": "\(event.sequence)",
                                                "protd.lock.reason": "\(event.reason?.description ?? "none")"])
        }
        if store.lockState != .locking { answerPending() }
        setAlarms()
        hub.broadcast(events)
    }

    /// Sets the alarms for the store's pending deadlines, or turns them off.
    private func setAlarms() {
        guard !stopped else { return }
        let status = store.status
        graceAlarm.set(status.lockDeadline) { deadline in
            Task { [weak self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                guard !Task.isCancelled else { return }
                await self?.deadlineReached()
            }
        }
        firstUnlockAlarm.set(status.firstUnlockDeadline) { deadline in
            Task { [weak self] in
                while case let remaining = BootInstant.now.duration(to: deadline), remaining > .zero {
                    try? await Task.sleep(for: min(remaining, Self.firstUnlockCheckInterval))
                    guard !Task.isCancelled else { return }
                }
                await self?.firstUnlockTimeoutReached()
            }
        }
    }

    private func answerPending() {
        let answers = settledAnswers.values.joined()
        settledAnswers.removeAll()
        let state = store.lockState
        for answer in answers { answer(state) }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
