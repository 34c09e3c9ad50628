internal import ProtectionCore
internal import Logging

/// Turns the text of one value into its typed form, or `nil` when the text
/// is not allowed (the caller then reports the key's `expected` sentence).
/// Every provider hands values over as text, so one parser serves the file,
/// the environment and the command line alike.
enum ValueParsing {
    /// A path: non-empty, no NUL, and not starting with `~` (nothing expands it).
    static func path(_ text: String) -> String? {
        guard !text.isEmpty, !text.hasPrefix("~"), !text.utf8.contains(0) else { return nil }
        return text
    }

    /// A socket path: a path that fits `sockaddr_un.sun_path`.
    static func socketPath(_ text: String) -> String? {
        guard let path = path(text), path.utf8.count <= DaemonConfiguration.Limits.maximumSocketPathBytes else {
            return nil
        }
        return path
    }

    /// An optional path: empty, `~` or `null` (YAML's spellings of nothing) mean none.
    static func optionalPath(_ text: String) -> String?? {
        if isNone(text) { return .some(nil) }
        return path(text).map { .some($0) }
    }

    /// A group name or numeric gid: non-empty, at most 256 bytes, no
    /// whitespace, `:`, `/` or NUL, not starting with `-`.
    static func groupName(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 256, !text.hasPrefix("-"),
              !text.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0 == ":" || $0 == "/" || $0 == "\0" })
        else { return nil }
        return text
    }

    /// An optional group name: empty, `~` or `null` mean none.
    static func optionalGroupName(_ text: String) -> String?? {
        if isNone(text) { return .some(nil) }
        return groupName(text).map { .some($0) }
    }

    /// `true` or `false` (YAML's spellings, any case; also `yes`/`no`, `on`/`off`).
    static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "on": true
        case "false", "no", "off": false
        default: nil
        }
    }

    /// Whether `text` is one of the ways to write "no value".
    private static func isNone(_ text: String) -> Bool {
        text.isEmpty || text == "~" || text == "null"
    }

    /// Permission bits from 0 to 0o777. With a leading `0` or `0o` the digits
    /// are octal (`0660`, `0o660`), as in C and YAML 1.1 (and as Yams reads an
    /// integer); without, the text is a decimal integer (`432` = `0o660`).
    static func mode(_ text: String) -> UInt32? {
        var digits = Substring(text)
        var radix = 10
        if digits.hasPrefix("0o") || digits.hasPrefix("0O") {
            digits = digits.dropFirst(2)
            radix = 8
        } else if digits.hasPrefix("0") {
            radix = 8
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              let value = UInt32(digits, radix: radix), value <= 0o777
        else { return nil }
        return value
    }

    /// A finite number of seconds in `0...maximumGraceSeconds`, fractions allowed.
    static func graceSeconds(_ text: String) -> Duration? {
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0,
              seconds <= Double(DaemonConfiguration.Limits.maximumGraceSeconds)
        else { return nil }
        if seconds == seconds.rounded(.towardZero) { return .seconds(Int64(seconds)) }
        return .seconds(seconds)
    }

    /// A duration: a decimal number (fractions allowed) of seconds, or
    /// followed by `s`, `m`, `h` or `d`, up to `maximumFirstUnlockTimeoutSeconds`.
    /// `0` is off (`.some(nil)`).
    static func firstUnlockTimeout(_ text: String) -> Duration?? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        let unit = text.last.flatMap { units[$0] }
        let number = unit == nil ? Substring(text) : text.dropLast()
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(number) else { return nil }
        let seconds = value * (unit ?? 1)
        guard seconds <= Double(DaemonConfiguration.Limits.maximumFirstUnlockTimeoutSeconds) else { return nil }
        if seconds == 0 { return .some(nil) }
        return seconds == seconds.rounded(.towardZero) ? .seconds(Int64(seconds)) : .seconds(seconds)
    }

    /// A decimal integer within `range`.
    static func integer(in range: ClosedRange<Int>) -> @Sendable (String) -> Int? {
        { text in
            guard let value = Int(text), range.contains(value) else { return nil }
            return value
        }
    }

    /// A decimal integer of at least `minimum`.
    static func integer(atLeast minimum: Int) -> @Sendable (String) -> Int? {
        integer(in: minimum...Int.max)
    }

    /// A non-negative decimal integer that fits in `UInt64`.
    static func unsigned(_ text: String) -> UInt64? {
        UInt64(text)
    }

    /// A non-empty list of whole seconds >= 0.
    static func delays(_ items: [String]) -> [Int64]? {
        guard !items.isEmpty else { return nil }
        var delays: [Int64] = []
        for item in items {
            guard let delay = Int64(item), delay >= 0 else { return nil }
            delays.append(delay)
        }
        return delays
    }

    /// `auto` (`nil` inside) or the name of a content cipher this CPU runs.
    static func cipher(_ text: String) -> ContentCipher?? {
        if text == "auto" { return .some(nil) }
        guard let cipher = ContentCipher(name: text), cipher.isAvailable else { return nil }
        return cipher
    }

    /// A log level name, any case.
    static func logLevel(_ text: String) -> Logger.Level? {
        Logger.Level(rawValue: text.lowercased())
    }
}
