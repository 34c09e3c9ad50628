import Foundation
import Synchronization

/// Splits a byte stream into lines, keeping an unfinished last line.
final class LineSplitter: Sendable {
    private let pending = Mutex<[UInt8]>([])

    /// The lines `data` completes, without their newlines.
    func lines(appending data: Data) -> [String] {
        pending.withLock { pending in
            pending += data
            var lines: [String] = []
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: pending[..<newline], as: UTF8.self))
                pending.removeSubrange(...newline)
            }
            return lines
        }
    }
}
