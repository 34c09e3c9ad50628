import Foundation
import Synchronization

/// Collects when each subscriber of this process received an event and,
/// once all of them have, writes the receipt times to stdout for
/// protd-bench: lines `delivered <sequence> <ns> <ns> ...`, nanoseconds from
/// the origin. Lines stay below the pipe's atomic write size, so those of
/// several processes sharing the pipe never mix.
final class DeliveryLog: Sendable {
    /// Receipt times per line: 200 of at most 20 characters stay below the
    /// 4,096 bytes a pipe writes atomically.
    static let timesPerLine = 200

    private let subscribers: Int
    private let origin: ContinuousClock.Instant
    private let pending = Mutex<[UInt64: [Int64]]>([:])

    init(subscribers: Int, origin: ContinuousClock.Instant) {
        self.subscribers = subscribers
        self.origin = origin
    }

    /// Notes one subscriber's receipt of event `sequence`.
    func record(sequence: UInt64, receivedAt: ContinuousClock.Instant) {
        let (seconds, attoseconds) = origin.duration(to: receivedAt).components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        let complete: [Int64]? = pending.withLock { pending in
            pending[sequence, default: []].append(nanoseconds)
            guard pending[sequence]?.count == subscribers else { return nil }
            return pending.removeValue(forKey: sequence)
        }
        guard let complete else { return }
        for start in stride(from: 0, to: complete.count, by: Self.timesPerLine) {
            let times = complete[start..<min(complete.count, start + Self.timesPerLine)]
            Self.emit((["delivered", "\(sequence)"] + times.map(String.init)).joined(separator: " "))
        }
    }

    /// Writes one line to stdout at once, in one write (stdout is a pipe, so
    /// `print` would hold it back in its buffer).
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
