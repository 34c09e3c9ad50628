internal import Foundation
public import ProtectionCore
internal import Synchronization

/// A wall clock tests move by hand.
public final class ManualWallClock: WallClock {
    private let seconds: Mutex<Int64>

    /// Starts at `start` seconds since the epoch.
    public init(start: Int64 = 1_800_000_000) { seconds = Mutex(start) }

    public func secondsSinceEpoch() -> Int64 { seconds.withLock { $0 } }

    /// Moves the clock forward (or back, with a negative value).
    public func advance(bySeconds delta: Int64) { seconds.withLock { $0 += delta } }
}
