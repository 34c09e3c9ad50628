public import ProtectionModel
internal import ProtectionWire

/// A change of the daemon's lock state, pushed to subscribed clients.
public struct ProtectionEvent: Sendable, Equatable, Hashable {
    /// What happened.
    public enum Kind: Sendable, Equatable, Hashable {
        /// A lock started: class `.complete` data goes away at the deadline
        /// (Unix milliseconds) at the latest, and class
        /// `.completeUntilFirstUserAuthentication` data too when the reason
        /// is `.inactivity` or `.shutdown`. Close those files, then
        /// `acknowledge` the event so the lock need not wait.
        case willBecomeUnavailable(deadlineUnixMilliseconds: UInt64)
        /// The lock completed: class `.complete` files are unreadable and
        /// their open handles were invalidated; in state
        /// `.beforeFirstUnlock`, class `.completeUntilFirstUserAuthentication`
        /// ones too.
        case didBecomeUnavailable
        /// An unlock: protected data is readable again. `firstUnlock` is true
        /// when leaving `.beforeFirstUnlock` (after a start, or after the
        /// first-unlock timeout).
        case didBecomeAvailable(firstUnlock: Bool)
    }

    /// What happened.
    public var kind: Kind
    /// Increases by one with every event of a daemon run; compare with
    /// `DaemonStatus.eventSequence` to resynchronise.
    public var sequence: UInt64
    /// The lock state after the event.
    public var state: LockState
    /// Why data becomes unavailable: set on `willBecomeUnavailable` and
    /// `didBecomeUnavailable`, nil on `didBecomeAvailable`.
    public var reason: LockReason?

    /// Makes an event.
    public init(kind: Kind, sequence: UInt64, state: LockState, reason: LockReason? = nil) {
        self.kind = kind
        self.sequence = sequence
        self.state = state
        self.reason = reason
    }
}

extension ProtectionEvent {
    init(_ wire: WireEvent) {
        let kind: Kind = switch wire.kind {
        case .willBecomeUnavailable: .willBecomeUnavailable(deadlineUnixMilliseconds: wire.deadlineUnixMilliseconds)
        case .didBecomeUnavailable: .didBecomeUnavailable
        case .didBecomeAvailable: .didBecomeAvailable(firstUnlock: wire.firstUnlock)
        }
        self.init(kind: kind, sequence: wire.sequence, state: wire.state, reason: wire.reason)
    }
}
