public import Logging
public import ProtectionCore
internal import ProtectionWire
internal import Sodium

/// Drives the store's lock life cycle in real time: starts locks, runs the
/// grace-period timer, takes acknowledgements, unlocks, and publishes every
/// resulting event through the hub. Audit lines for lock, unlock, the
/// recovery key and failed attempts are logged here (never a passcode or
/// key).
public actor LockController {
    private let store: ProtectedStore
    private let hub: EventHub
    private let defaultGrace: Duration
    private let logger: Logger
    private var deadlineTimer: Task<Void, Never>?
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

    /// The configured grace period.
    public nonisolated var gracePeriod: Duration { defaultGrace }

    /// Starts a lock (already authorised by the caller).
    func lock(grace: Duration?, by peer: PeerCredentials) throws {
        let grace = grace ?? defaultGrace
        let progress = try store.requestLock(grace: grace, now: .now, subscribers: hub.subscriberIDs)
        logger.notice("lock requested", metadata: ["protd.peer.uid": "\(peer.uid)", "protd.peer.pid": "\(peer.pid)",
                                                    "protd.lock.grace_ms": "\(grace.milliseconds)"])
        apply(progress)
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
        apply(store.acknowledge(subscriber, sequence: sequence))
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
        apply(store.subscriberLeft(subscriber))
    }

    /// Stops the timer and gives every pending answer the current state
    /// (shutdown).
    func stop() {
        deadlineTimer?.cancel()
        deadlineTimer = nil
        answerPending()
    }

    private func apply(_ progress: LockProgress) {
        if let deadline = progress.pendingDeadline {
            deadlineTimer?.cancel()
            deadlineTimer = Task { [weak self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                guard !Task.isCancelled else { return }
                await self?.deadlineReached()
            }
        }
        publish(progress.events)
    }

    private func deadlineReached() {
        apply(store.deadlinePassed(now: .now))
    }

    /// Logs a completed lock, settles it if it is no longer `locking`, then
    /// broadcasts `events`. Pending lock answers go first, written to their
    /// event loops before the broadcast, so they do not queue behind one
    /// event frame per subscriber.
    private func publish(_ events: [ProtectionEvent]) {
        for event in events where event.kind == .didBecomeUnavailable {
            logger.notice("lock completed: class A keys and class B private key wiped",
                          metadata: ["protd.event.sequence": "\(event.sequence)"])
        }
        settleIfNotLocking()
        hub.broadcast(events)
    }

    /// Once the state has left `locking`: stops the timer and gives every
    /// pending answer the state.
    private func settleIfNotLocking() {
        guard store.lockState != .locking else { return }
        deadlineTimer?.cancel()
        deadlineTimer = nil
        answerPending()
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
