internal import NIOCore
internal import ProtectionWire
internal import Synchronization

/// How many frames make up the answer to one request.
enum AnswerShape: Sendable {
    /// The first frame is the whole answer.
    case single
    /// Frames up to and including `end` (or the first `error`).
    case untilEnd
}

/// Matches the daemon's frames to the requests waiting for them: answers by
/// request id, events (id 0) to every event subscriber. The reader task
/// feeds it; callers register before they send and wait after.
///
/// Every slot is either waiting for frames, or holds its outcome until the
/// caller collects it. Answers for ids nobody waits for any more (a
/// cancelled, timed-out or abandoned request) are dropped.
///
/// Every wait is bounded: each slot, and each send that waits for room in
/// the socket, has a deadline (`timeout` from when it began). A streamed
/// answer's deadline moves on with each of its frames, so it may last as
/// long as frames keep coming; a streamed write's slot gets its deadline
/// only when its end is sent (`startClock`), as the daemon answers only
/// then. A sweep on the event loop, armed only while something waits,
/// settles a slot past its deadline with `.timedOut`; a send past its
/// deadline means the daemon stopped reading, so the connection is closed
/// with `.timedOut`.
final class RequestRouter: Sendable {
    /// The outcome of a request: its frames (the last may be `.error`), or
    /// why the connection could not deliver them.
    typealias Outcome = Result<[Response], DataProtectionError>

    /// What the reader must do after a frame.
    enum Action: Equatable {
        /// Keep reading.
        case keepReading
        /// Stop reading and close the connection.
        case closeConnection
        /// Keep reading, and send `acknowledge(sequence)` under `requestID`
        /// now, from the event loop (an event observer asked for it).
        case acknowledge(sequence: UInt64, requestID: UInt32)
    }

    private struct Slot {
        var shape: AnswerShape
        /// How long the answer (or its next frame) may take, and when that
        /// ends; no deadline while the answer is not due yet.
        var timeout: Duration
        var deadline: ContinuousClock.Instant?
        var frames: [Response] = []
        var outcome: Outcome?
        var waiter: CheckedContinuation<Outcome, Never>?
    }

    private struct State {
        var nextRequestID: UInt32 = 1
        var slots: [UInt32: Slot] = [:]
        var nextSubscriberID: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<ProtectionEvent>.Continuation] = [:]
        var observers: [UInt64: EventObserver] = [:]
        /// Set when a `subscribed` answer arrives, before any event after it.
        var subscribed = false
        /// Set once the connection is closed: why.
        var failure: DataProtectionError?
        /// Sends in progress, by token: when each must have finished.
        var sends: [UInt64: ContinuousClock.Instant] = [:]
        var nextSendToken: UInt64 = 0
        /// Whether a sweep is scheduled.
        var sweepArmed = false
        /// The channel a send timeout closes, once the connection is open.
        var channel: (any Channel)?
    }

    private let state = Mutex(State())
    /// How long one wait for the daemon may last (see `DataProtectionClient.connect`).
    let timeout: Duration
    /// The loop the sweeps run on: the connection's.
    private let loop: any EventLoop
    /// How often a sweep looks for waits past their deadline while any wait.
    static let sweepInterval = TimeAmount.milliseconds(250)

    init(loop: any EventLoop, timeout: Duration) {
        self.loop = loop
        self.timeout = timeout
    }

    /// The channel to close when a send times out.
    func attach(_ channel: any Channel) {
        state.withLock { $0.channel = channel }
    }

    // MARK: Requests

    /// Takes the next request id without expecting an answer (fire and forget).
    func untrackedRequestID() throws(DataProtectionError) -> UInt32 {
        try state.withLock { state throws(DataProtectionError) in
            if let failure = state.failure { throw Self.laterCallError(failure) }
            return Self.takeID(&state)
        }
    }

    /// Takes the next request id and a slot for its answer, which must
    /// come within `timeout` (the router's when nil): from now, or, when
    /// `due` is false, from `startClock`.
    func register(_ shape: AnswerShape, timeout: Duration? = nil, due: Bool = true) throws(DataProtectionError) -> UInt32 {
        let limit = timeout ?? self.timeout
        let deadline = due ? ContinuousClock.now + limit : nil
        let (id, arm) = try state.withLock { state throws(DataProtectionError) in
            if let failure = state.failure { throw Self.laterCallError(failure) }
            let id = Self.takeID(&state)
            state.slots[id] = Slot(shape: shape, timeout: limit, deadline: deadline)
            return (id, Self.claimSweep(&state))
        }
        if arm { scheduleSweep() }
        return id
    }

    /// Gives the slot of `id`, registered as not due, its deadline from now.
    func startClock(_ id: UInt32) {
        let now = ContinuousClock.now
        let arm = state.withLock { state in
            guard var slot = state.slots[id], slot.outcome == nil else { return false }
            slot.deadline = now + slot.timeout
            state.slots[id] = slot
            return Self.claimSweep(&state)
        }
        if arm { scheduleSweep() }
    }

    // MARK: Sends

    /// Marks the start of a send that may wait for room in the socket;
    /// pass the token to `endSend` when it returns.
    func beginSend() -> UInt64 {
        let deadline = ContinuousClock.now + timeout
        let (token, arm) = state.withLock { state in
            let token = state.nextSendToken
            state.nextSendToken += 1
            state.sends[token] = deadline
            return (token, Self.claimSweep(&state))
        }
        if arm { scheduleSweep() }
        return token
    }

    /// Marks the end of the send `token`.
    func endSend(_ token: UInt64) {
        _ = state.withLock { $0.sends.removeValue(forKey: token) }
    }

    // MARK: Deadlines

    /// Arms a sweep unless one is armed; true when the caller must schedule it.
    private static func claimSweep(_ state: inout State) -> Bool {
        guard !state.sweepArmed, state.failure == nil else { return false }
        state.sweepArmed = true
        return true
    }

    private func scheduleSweep() {
        loop.scheduleTask(in: Self.sweepInterval) { [weak self] in self?.sweep() }
    }

    /// Settles the slots past their deadline with `.timedOut`; closes the
    /// connection when a send is past its deadline, or an answer is overdue
    /// while a send still waits for the daemon to take data (it reads
    /// nothing on this connection); re-arms while anything waits.
    private func sweep() {
        let now = ContinuousClock.now
        let (expired, stalledChannel, rearm) = state.withLock { state in
            var expired: [(CheckedContinuation<Outcome, Never>, DataProtectionError)] = []
            var anyOverdue = false
            for (id, var slot) in state.slots where slot.outcome == nil && slot.deadline.map({ $0 <= now }) == true {
                anyOverdue = true
                let error = DataProtectionError.timedOut(
                    "protd did not answer within \(slot.timeout.components.seconds) seconds")
                if let waiter = slot.waiter {
                    state.slots[id] = nil
                    expired.append((waiter, error))
                } else {
                    slot.outcome = .failure(error)
                    slot.frames = []
                    state.slots[id] = slot
                }
            }
            let sendStalled = state.sends.values.contains { $0 <= now } || (anyOverdue && !state.sends.isEmpty)
            let stalled = sendStalled ? state.channel : nil
            state.sweepArmed = state.failure == nil && (!state.slots.isEmpty || !state.sends.isEmpty)
            return (expired, stalled, state.sweepArmed)
        }
        // Closed before the waiters learn of their timeout, so a call they
        // make next already finds the connection closed.
        if let stalledChannel {
            close(with: .timedOut("protd took no data for \(timeout.components.seconds) seconds, so the connection was closed"))
            stalledChannel.close(promise: nil)
        }
        for (waiter, error) in expired { waiter.resume(returning: .failure(error)) }
        if rearm { scheduleSweep() }
    }

    /// The outcome of `id` if it is already known, without collecting it.
    func peek(_ id: UInt32) -> Outcome? {
        state.withLock { $0.slots[id]?.outcome }
    }

    /// Waits for the outcome of `id` and forgets the slot. Cancelling the
    /// task ends the wait with `.cancelled`; a later answer is dropped.
    func wait(for id: UInt32) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let ready: Outcome? = state.withLock { state in
                    guard var slot = state.slots[id] else {
                        return .failure(state.failure.map(Self.laterCallError)
                            ?? .protocolError("request \(id) has no answer slot"))
                    }
                    if let outcome = slot.outcome {
                        state.slots[id] = nil
                        return outcome
                    }
                    slot.waiter = continuation
                    state.slots[id] = slot
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            self.settle(id, with: .failure(.cancelled))
        }
    }

    /// Forgets `id`: its answer, when it comes, is dropped.
    func discard(_ id: UInt32) {
        let waiter = state.withLock { $0.slots.removeValue(forKey: id)?.waiter }
        waiter?.resume(returning: .failure(.cancelled))
    }

    // MARK: Events

    /// Adds an event subscriber; it is removed when its stream terminates,
    /// and finished at once if the connection is already closed.
    func addSubscriber(_ continuation: AsyncStream<ProtectionEvent>.Continuation) {
        let added: UInt64? = state.withLock { state in
            guard state.failure == nil else { return nil }
            let key = state.nextSubscriberID
            state.nextSubscriberID += 1
            state.subscribers[key] = continuation
            return key
        }
        guard let key = added else {
            continuation.finish()
            return
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
        }
    }

    /// Adds an event observer, called on the event loop; returns its key for
    /// `removeObserver`. Throws once the connection is closed.
    func addObserver(_ observer: @escaping EventObserver) throws(DataProtectionError) -> UInt64 {
        try state.withLock { state throws(DataProtectionError) in
            if let failure = state.failure { throw Self.laterCallError(failure) }
            let key = state.nextSubscriberID
            state.nextSubscriberID += 1
            state.observers[key] = observer
            return key
        }
    }

    /// Stops calling the observer added under `key`.
    func removeObserver(_ key: UInt64) {
        _ = state.withLock { $0.observers.removeValue(forKey: key) }
    }

    /// True once the daemon has answered `subscribe` on this connection.
    var isSubscribed: Bool { state.withLock { $0.subscribed } }

    // MARK: Frames from the daemon

    /// Routes one frame from the daemon.
    func receive(_ frame: Frame) -> Action {
        let response: Response
        do {
            response = try Response(frame: frame)
        } catch {
            close(with: .protocolError("protd sent a frame this library cannot read: \(error)"))
            return .closeConnection
        }
        guard frame.requestID != 0 else { return receiveUnsolicited(response) }

        let delivery: (CheckedContinuation<Outcome, Never>, Outcome)? = state.withLock { state in
            if case .subscribed = response { state.subscribed = true }
            guard var slot = state.slots[frame.requestID], slot.outcome == nil else { return nil }
            slot.frames.append(response)
            let complete: Bool
            switch (slot.shape, response) {
            case (.single, _), (.untilEnd, .end), (.untilEnd, .error):
                complete = true
            case (.untilEnd, _):
                complete = false
            }
            guard complete else {
                // A stream is bounded frame by frame: the next is due within the timeout.
                if slot.deadline != nil { slot.deadline = ContinuousClock.now + slot.timeout }
                state.slots[frame.requestID] = slot
                return nil
            }
            let outcome = Outcome.success(slot.frames)
            if let waiter = slot.waiter {
                state.slots[frame.requestID] = nil
                return (waiter, outcome)
            }
            slot.frames = []
            slot.outcome = outcome
            state.slots[frame.requestID] = slot
            return nil
        }
        if let (waiter, outcome) = delivery { waiter.resume(returning: outcome) }
        return .keepReading
    }

    private func receiveUnsolicited(_ response: Response) -> Action {
        switch response {
        case .event(let wireEvent):
            let event = ProtectionEvent(wireEvent)
            let (subscribers, observers) = state.withLock { (Array($0.subscribers.values), Array($0.observers.values)) }
            for subscriber in subscribers { subscriber.yield(event) }
            var acknowledged = false
            for observer in observers where observer(event) == .acknowledge { acknowledged = true }
            guard acknowledged, case .willBecomeUnavailable = event.kind,
                  let requestID = try? untrackedRequestID() else { return .keepReading }
            return .acknowledge(sequence: event.sequence, requestID: requestID)
        case .error(let wireError):
            close(with: DataProtectionError(wireError))
            return .closeConnection
        default:
            // Only events and connection errors use id 0; anything else is ignored.
            return .keepReading
        }
    }

    // MARK: Closing

    /// Marks the connection closed: every waiting request fails with
    /// `error`, every later call with `daemonUnavailable`, and every event
    /// stream finishes. Only the first reason counts.
    func close(with error: DataProtectionError) {
        let (waiters, subscribers) = state.withLock { state in
            var waiters: [CheckedContinuation<Outcome, Never>] = []
            guard state.failure == nil else { return (waiters, [AsyncStream<ProtectionEvent>.Continuation]()) }
            state.failure = error
            for (id, var slot) in state.slots where slot.outcome == nil {
                if let waiter = slot.waiter {
                    waiters.append(waiter)
                    state.slots[id] = nil
                } else {
                    slot.outcome = .failure(error)
                    slot.frames = []
                    state.slots[id] = slot
                }
            }
            let subscribers = Array(state.subscribers.values)
            state.subscribers = [:]
            state.observers = [:]
            return (waiters, subscribers)
        }
        for waiter in waiters { waiter.resume(returning: .failure(error)) }
        for subscriber in subscribers { subscriber.finish() }
    }

    /// Why calls fail now, or nil while the connection is open.
    var closedError: DataProtectionError? {
        state.withLock { $0.failure.map(Self.laterCallError) }
    }

    /// What closed the router, as it came (such as the daemon's
    /// `tooManyConnections`, which can arrive before the hello is sent),
    /// or nil while open.
    var failure: DataProtectionError? {
        state.withLock { $0.failure }
    }

    // MARK: Helpers

    private func settle(_ id: UInt32, with outcome: Outcome) {
        let waiter: CheckedContinuation<Outcome, Never>? = state.withLock { state in
            guard var slot = state.slots[id], slot.outcome == nil else { return nil }
            if let waiter = slot.waiter {
                state.slots[id] = nil
                return waiter
            }
            slot.outcome = outcome
            slot.frames = []
            state.slots[id] = slot
            return nil
        }
        waiter?.resume(returning: outcome)
    }

    private static func takeID(_ state: inout State) -> UInt32 {
        let id = state.nextRequestID
        state.nextRequestID = id == UInt32.max ? 1 : id + 1
        return id
    }

    /// Calls made after the connection closed fail as `daemonUnavailable`
    /// (or `clientClosed`, when this client closed it).
    private static func laterCallError(_ failure: DataProtectionError) -> DataProtectionError {
        switch failure {
        case .daemonUnavailable, .clientClosed: failure
        default: .daemonUnavailable("the connection to protd was closed after a \(failure.code) error")
        }
    }
}
