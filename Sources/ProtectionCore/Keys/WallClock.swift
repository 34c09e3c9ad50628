internal import Glibc

/// Wall-clock time in whole seconds since the Unix epoch. Failed-attempt
/// delays use it because they must survive a restart.
public protocol WallClock: Sendable {
    /// Seconds since 1970-01-01 UTC.
    func secondsSinceEpoch() -> Int64
}

/// The system's real-time clock.
public struct SystemWallClock: WallClock {
    /// Makes the system clock.
    public init() {}

    public func secondsSinceEpoch() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }
}
