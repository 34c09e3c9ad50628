/// The daemon's lock state, as clients see it.
public enum LockState: String, Sendable, Equatable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Started, and nobody has given the passcode yet.
    case beforeFirstUnlock
    /// Every class key is in memory.
    case unlocked
    /// A lock was asked for; the grace period runs. Behaves as `unlocked`.
    case locking
    /// Class A key and class B private key are wiped.
    case locked

    public var description: String { rawValue }
}
