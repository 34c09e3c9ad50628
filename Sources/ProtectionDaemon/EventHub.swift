internal import Glibc
internal import NIOCore
internal import ProtectionCore
internal import ProtectionWire
internal import Synchronization

/// Where the hub sends one subscriber's event frames.
protocol EventReceiver: Sendable {
    /// The event loop `deliver` runs on.
    var eventLoop: any EventLoop { get }
    /// Takes frames to send, in order, each in its wire form (`Frame.encoded()`);
    /// called on `eventLoop`, so it must not block or wait for the subscriber.
    func deliver(_ frames: [ByteBuffer])
}

/// Fans lock events out to subscribers. Each subscriber's receiver keeps a
/// bounded buffer of the newest events (`EventSink`), so a slow or dead
/// subscriber never delays the others or the lock. Each event is encoded
/// once, to its wire form: every subscriber is sent the same bytes, not a
/// copy of its own.
public final class EventHub: Sendable {
    /// Events kept per subscriber when it does not read.
    public static let bufferSize = 64

    private struct State {
        var subscribers: [SubscriberID: any EventReceiver] = [:]
        var nextID: UInt64 = 1
    }

    private let state = Mutex(State())

    /// Makes an empty hub.
    public init() {}

    /// Registers a subscriber; `receiver` gets event frames (request id 0,
    /// encoded, ready to send) until `unsubscribe`.
    func subscribe(_ receiver: any EventReceiver) -> SubscriberID {
        state.withLock { state in
            let id = SubscriberID(state.nextID)
            state.nextID += 1
            state.subscribers[id] = receiver
            return id
        }
    }

    /// Removes a subscriber; it gets nothing more.
    func unsubscribe(_ id: SubscriberID) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    /// The subscribers a lock must wait for.
    var subscriberIDs: Set<SubscriberID> {
        state.withLock { Set($0.subscribers.keys) }
    }

    /// Delivers events, in order, to every subscriber, without waiting for
    /// any. Each event becomes one frame, shared by all subscribers.
    func broadcast(_ events: [ProtectionEvent]) {
        guard !events.isEmpty else { return }
        let frames = events.map { Response.event(WireEvent($0)).frame(requestID: 0).encoded() }
        let receivers = state.withLock { Array($0.subscribers.values) }
        // One hop per event loop, which then writes to all of its subscribers
        // before it reads anything more, their acknowledgements included.
        for group in Dictionary(grouping: receivers, by: { ObjectIdentifier($0.eventLoop) }).values {
            group[0].eventLoop.execute {
                for receiver in group { receiver.deliver(frames) }
            }
        }
    }

    /// Forgets every subscriber (shutdown).
    func finishAll() {
        state.withLock { $0.subscribers.removeAll() }
    }
}

extension WireEvent {
    /// The wire form of a state-machine event; the deadline becomes
    /// wall-clock milliseconds.
    init(_ event: ProtectionEvent) {
        switch event.kind {
        case .willBecomeUnavailable(let deadline):
            self.init(kind: .willBecomeUnavailable, sequence: event.sequence, state: event.state,
                      deadlineUnixMilliseconds: UnixTime.milliseconds(at: deadline), reason: event.reason)
        case .didBecomeUnavailable:
            self.init(kind: .didBecomeUnavailable, sequence: event.sequence, state: event.state, reason: event.reason)
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
