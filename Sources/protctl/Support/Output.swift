import DataProtection
import Foundation

/// Printing: human text or one JSON document on stdout; errors on stderr.
enum Output {
    /// Prints `object` as a JSON document (sorted keys) on one line.
    static func json(_ object: [String: Any]) {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        write(data + Data("\n".utf8), to: STDOUT_FILENO)
    }

    /// Prints a line on stdout.
    static func line(_ text: String) {
        write(Data((text + "\n").utf8), to: STDOUT_FILENO)
    }

    /// Prints the error as one line on stderr (a library error's sentence
    /// already says when to retry).
    static func error(_ error: any Error) {
        write(Data("protctl: \(error)\n".utf8), to: STDERR_FILENO)
    }

    /// Writes `bytes` to `fd`, best effort: when the reader has gone (a
    /// closed pipe) there is no one left to tell, so the rest is dropped.
    /// `FileHandle.write` would crash the process instead.
    private static func write(_ bytes: Data, to fd: Int32) {
        _ = bytes.withUnsafeBytes { writeAll(fd, $0) }
    }

    /// `text` with its control characters escaped (`\u{1B}`), so that
    /// names from disk cannot move the cursor or start a new line.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.flatMap { scalar in
            scalar.properties.generalCategory == .control ? Array(scalar.escaped(asASCII: false).unicodeScalars) : [scalar]
        }.map(Character.init))
    }

    /// A file's attributes as JSON fields.
    static func fields(_ attributes: FileAttributes) -> [String: Any] {
        ["name": attributes.name, "protection": attributes.protection.description, "size": attributes.size,
         "modificationTime": attributes.modificationTimeUnixSeconds]
    }

    /// The short class name used in listings.
    static func shortName(_ protection: FileProtection) -> String {
        switch protection {
        case .complete: "complete"
        case .completeUnlessOpen: "unlessOpen"
        case .completeUntilFirstUserAuthentication: "untilFirstUserAuthentication"
        case .none: "none"
        }
    }

    /// `2026-11-21T23:04:00Z` from Unix seconds.
    static func timestamp(_ seconds: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
