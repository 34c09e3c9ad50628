public import ProtectionModel

/// Identifies one event subscriber to the lock state machine.
public struct SubscriberID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The raw number, unique within one daemon run.
    public let rawValue: UInt64

    /// Wraps a number.
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    public static func < (lhs: SubscriberID, rhs: SubscriberID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "subscriber-\(rawValue)" }
}

/// A notification pushed to subscribers.
public struct ProtectionEvent: Sendable, Equatable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// A lock started; class A data (and class C data on a return to
        /// `beforeFirstUnlock`) goes away at `deadline` at the latest.
        case willBecomeUnavailable(deadline: ContinuousClock.Instant)
        /// The lock completed: class A keys are gone (and class C's when the
        /// state is `beforeFirstUnlock`).
        case didBecomeUnavailable
        /// An unlock: protected data is readable again. `firstUnlock` is
        /// true for the first unlock since the daemon started.
        case didBecomeAvailable(firstUnlock: Bool)
    }

    /// What happened.
    public let kind: Kind
    /// Increases by one with every event of a daemon run.
    public let sequence: UInt64
    /// The state after the event.
    public let state: LockState
    /// Why data becomes unavailable: set on `willBecomeUnavailable` and
    /// `didBecomeUnavailable`, nil on `didBecomeAvailable`.
    public let reason: LockReason?

    /// Makes an event (the state machine does; so do decoders of events).
    public init(kind: Kind, sequence: UInt64, state: LockState, reason: LockReason? = nil) {
        self.kind = kind
        self.sequence = sequence
        self.state = state
        self.reason = reason
    }
}
