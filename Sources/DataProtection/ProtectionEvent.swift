public import ProtectionModel
internal import ProtectionWire

/// A change of the daemon's lock state, pushed to subscribed clients.
public struct ProtectionEvent: Sendable, Equatable, Hashable {
    /// What happened.
    public enum Kind: Sendable, Equatable, Hashable {
        /// A lock started: class `.complete` data goes away at the deadline
        /// (Unix milliseconds) at the latest. Close class `.complete` files,
        /// then `acknowledge` the event so the lock need not wait.
        case willBecomeUnavailable(deadlineUnixMilliseconds: UInt64)
        /// The lock completed: class `.complete` files are unreadable and
        /// their open handles were invalidated.
        case didBecomeUnavailable
        /// An unlock: protected data is readable again. `firstUnlock` is true
        /// for the first unlock since the daemon started.
        case didBecomeAvailable(firstUnlock: Bool)
    }

    /// What happened.
    public var kind: Kind
    /// Increases by one with every event of a daemon run; compare with
    /// `DaemonStatus.eventSequence` to resynchronise.
    public var sequence: UInt64
    /// The lock state after the event.
    public var state: LockState

    /// Makes an event.
    public init(kind: Kind, sequence: UInt64, state: LockState) {
        self.kind = kind
        self.sequence = sequence
        self.state = state
    }
}

extension ProtectionEvent {
    init(_ wire: WireEvent) {
        let kind: Kind = switch wire.kind {
        case .willBecomeUnavailable: .willBecomeUnavailable(deadlineUnixMilliseconds: wire.deadlineUnixMilliseconds)
        case .didBecomeUnavailable: .didBecomeUnavailable
        case .didBecomeAvailable: .didBecomeAvailable(firstUnlock: wire.firstUnlock)
        }
        self.init(kind: kind, sequence: wire.sequence, state: wire.state)
    }
}
