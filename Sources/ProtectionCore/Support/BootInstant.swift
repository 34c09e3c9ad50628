internal import Glibc

/// A point on `CLOCK_BOOTTIME`: time since boot, suspend included (where
/// `CLOCK_MONOTONIC` stops while the machine sleeps). The first-unlock
/// timeout counts on it, so sleeping does not postpone it.
public struct BootInstant: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Time since boot.
    public let sinceBoot: Duration

    /// The instant `sinceBoot` after boot (tests make their own).
    public init(sinceBoot: Duration) { self.sinceBoot = sinceBoot }

    /// Now, from `clock_gettime(CLOCK_BOOTTIME)`.
    public static var now: BootInstant {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return BootInstant(sinceBoot: .seconds(Int64(time.tv_sec)) + .nanoseconds(Int64(time.tv_nsec)))
    }

    /// The time from this instant to `other` (negative when `other` is earlier).
    public func duration(to other: BootInstant) -> Duration { other.sinceBoot - sinceBoot }

    public static func + (instant: BootInstant, duration: Duration) -> BootInstant {
        BootInstant(sinceBoot: instant.sinceBoot + duration)
    }

    public static func < (lhs: BootInstant, rhs: BootInstant) -> Bool { lhs.sinceBoot < rhs.sinceBoot }

    public var description: String { "boot+\(sinceBoot)" }
}
