/// Why the daemon's configuration could not be loaded. The message names the
/// configuration key (or the flag) at fault, the value given, where it came
/// from and what is allowed, so the operator can fix it without reading code.
///
/// ```
/// invalid value for lock.grace-period-seconds: "-1" (expected a number of seconds from 0 to 86400), given by --lock-grace-period-seconds
/// ```
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem was found.
    public enum Code: String, Sendable, Equatable, Hashable, CaseIterable {
        /// A key has a value of the wrong type or outside its allowed range,
        /// or a flag is missing its value or has too many.
        case invalidValue
        /// The same key was given twice on the command line (for example as
        /// `--socket` and `--socket-path`).
        case duplicateFlag
        /// A command-line flag protd does not know.
        case unknownFlag
        /// A command-line argument that belongs to no flag.
        case unexpectedArgument
        /// The configuration file holds a key protd does not know (often a typo).
        case unknownKey
        /// The configuration file given by `--config` or `PROTD_CONFIG` does not exist.
        case configFileNotFound
        /// The configuration file exists but could not be read or parsed.
        case configFileUnreadable
    }

    /// What kind of problem was found.
    public let code: Code
    /// The configuration key at fault (`lock.grace-period-seconds`), or for
    /// command-line problems the flag or argument as typed (`--sokcet`), or
    /// `config` for problems with the configuration file itself.
    public let key: String
    /// A sentence for a person: names `key`, the value given, its source and
    /// what is allowed.
    public let message: String

    /// Makes an error; `message` must name `key`.
    public init(_ code: Code, key: String, message: String) {
        self.code = code
        self.key = key
        self.message = message
    }

    /// The message.
    public var description: String { message }

    /// `invalid value for KEY: "RAW" (expected EXPECTED), given by SOURCE`.
    static func invalidValue(_ key: String, raw: String?, expected: String, source: String?) -> Self {
        var message = "invalid value for \(key)"
        if let raw { message += ": \"\(raw)\"" }
        message += " (expected \(expected))"
        if let source { message += ", given by \(source)" }
        return Self(.invalidValue, key: key, message: message)
    }
}
