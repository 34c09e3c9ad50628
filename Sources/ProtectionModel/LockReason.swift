/// Why protected data becomes unavailable, as lock events report it.
public enum LockReason: String, Sendable, Equatable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Someone asked for a lock (`protctl lock`, the client library).
    case requested
    /// Nobody unlocked for `lock.first-unlock-timeout`: back to `beforeFirstUnlock`.
    case inactivity
    /// The system is about to sleep (a lock that said so, such as the
    /// lock-before-sleep unit's).
    case suspend
    /// protd is stopping: every key goes, as at a restart.
    case shutdown

    /// Whether a client may give this reason in a lock request; the others
    /// are protd's own.
    public var isRequestable: Bool { self == .requested || self == .suspend }

    public var description: String { rawValue }
}
