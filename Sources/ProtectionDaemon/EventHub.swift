internal import Glibc
internal import ProtectionCore
internal import ProtectionWire
internal import Synchronization

/// Fans lock events out to subscribers. Each subscriber has its own bounded
/// buffer that keeps the newest events, so a slow or dead subscriber never
/// delays the others or the lock. Each event is encoded once: every
/// subscriber's buffer holds the same frame, whose bytes are shared.
public final class EventHub: Sendable {
    /// Events kept per subscriber when it does not read.
    public static let bufferSize = 64

    private struct State {
        var subscribers: [SubscriberID: AsyncStream<Frame>.Continuation] = [:]
        var nextID: UInt64 = 1
    }

    private let state = Mutex(State())

    /// Makes an empty hub.
    public init() {}

    /// Registers a subscriber; its stream of event frames (request id 0,
    /// ready to send) ends on `unsubscribe`.
    func subscribe() -> (SubscriberID, AsyncStream<Frame>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Frame.self,
                                                            bufferingPolicy: .bufferingNewest(Self.bufferSize))
        let id = state.withLock { state in
            let id = SubscriberID(state.nextID)
            state.nextID += 1
            state.subscribers[id] = continuation
            return id
        }
        return (id, stream)
    }

    /// Removes a subscriber and finishes its stream.
    func unsubscribe(_ id: SubscriberID) {
        state.withLock { $0.subscribers.removeValue(forKey: id) }?.finish()
    }

    /// The subscribers a lock must wait for.
    var subscriberIDs: Set<SubscriberID> {
        state.withLock { Set($0.subscribers.keys) }
    }

    /// Delivers events, in order, to every subscriber, without waiting for
    /// any. Each event becomes one frame, shared by all subscribers.
    func broadcast(_ events: [ProtectionEvent]) {
        guard !events.isEmpty else { return }
        let frames = events.map { Response.event(WireEvent($0)).frame(requestID: 0) }
        let continuations = state.withLock { Array($0.subscribers.values) }
        for continuation in continuations {
            for frame in frames { continuation.yield(frame) }
        }
    }

    /// Ends every subscriber's stream (shutdown).
    func finishAll() {
        let continuations = state.withLock { state in
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}

extension WireEvent {
    /// The wire form of a state-machine event; the deadline becomes
    /// wall-clock milliseconds.
    init(_ event: ProtectionEvent) {
        switch event.kind {
        case .willBecomeUnavailable(let deadline):
            self.init(kind: .willBecomeUnavailable, sequence: event.sequence, state: event.state,
                      deadlineUnixMilliseconds: UnixTime.milliseconds(at: deadline))
        case .didBecomeUnavailable:
            self.init(kind: .didBecomeUnavailable, sequence: event.sequence, state: event.state)
        case .didBecomeAvailable(let first):
            self.init(kind: .didBecomeAvailable, sequence: event.sequence, state: event.state, firstUnlock: first)
        }
    }
}

/// Converts monotonic instants to wall-clock time for clients.
enum UnixTime {
    /// Milliseconds since the epoch now.
    static func nowMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }

    /// The wall-clock time, in milliseconds since the epoch, of `instant`.
    static func milliseconds(at instant: ContinuousClock.Instant) -> UInt64 {
        let remaining = ContinuousClock.now.duration(to: instant)
        let (seconds, attoseconds) = remaining.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return UInt64(max(0, Int64(nowMilliseconds()) + milliseconds))
    }
}
