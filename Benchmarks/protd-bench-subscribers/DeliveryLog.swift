import Foundation
import Synchronization

/// Collects when each subscriber of this process received an event and,
/// once all of them have, writes the receipt times to stdout for
/// protd-bench: lines `<receipt> <sequence> <ns> <ns> ...`, nanoseconds from
/// the origin, where `<receipt>` is a `Receipt`. Lines stay below the
/// pipe's atomic write size, so those of several processes sharing the
/// pipe never mix.
final class DeliveryLog: Sendable {
    /// The events whose receipt is reported, by the word that starts their lines.
    enum Receipt: String, Sendable {
        /// willBecomeUnavailable: the lock's notification, the one timed.
        case delivered
        /// didBecomeAvailable: an unlock's, so protd-bench can wait until
        /// its fan-out is over before it times the next lock.
        case available
    }

    private struct Key: Hashable {
        let receipt: Receipt
        let sequence: UInt64
    }

    /// Receipt times per line: 200 of at most 20 characters stay below the
    /// 4,096 bytes a pipe writes atomically.
    static let timesPerLine = 200

    private let subscribers: Int
    private let origin: ContinuousClock.Instant
    private let pending = Mutex<[Key: [Int64]]>([:])

    init(subscribers: Int, origin: ContinuousClock.Instant) {
        self.subscribers = subscribers
        self.origin = origin
    }

    /// Notes one subscriber's receipt of event `sequence`.
    func record(_ receipt: Receipt = .delivered, sequence: UInt64, receivedAt: ContinuousClock.Instant) {
        let (seconds, attoseconds) = origin.duration(to: receivedAt).components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        let key = Key(receipt: receipt, sequence: sequence)
        let complete: [Int64]? = pending.withLock { pending in
            pending[key, default: []].append(nanoseconds)
            guard pending[key]?.count == subscribers else { return nil }
            return pending.removeValue(forKey: key)
        }
        guard let complete else { return }
        for start in stride(from: 0, to: complete.count, by: Self.timesPerLine) {
            let times = complete[start..<min(complete.count, start + Self.timesPerLine)]
            Self.emit(([receipt.rawValue, "\(sequence)"] + times.map(String.init)).joined(separator: " "))
        }
    }

    /// Writes one line to stdout at once, in one write (stdout is a pipe, so
    /// `print` would hold it back in its buffer).
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
