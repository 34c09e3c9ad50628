/// Checks the command line before `CommandLineArgumentsProvider` reads it.
///
/// Why an adapter: the provider only answers "what was given for this key";
/// it silently ignores flags nobody asks about (`--sokcet-path`), arguments
/// that belong to no flag, and a key given twice under two spellings
/// (`--socket` and `--socket-path`). A daemon that starts with a typo'd flag
/// ignored would run with a setting the operator did not choose, so this
/// pass groups the arguments the way the provider does (`--flag v...`,
/// `--flag=v`) and refuses anything it cannot attribute to exactly one key.
struct CommandLineCheck {
    /// The arguments without the program name.
    let arguments: [String]

    /// Flags that ask for help.
    static let helpFlags: Set<String> = ["--help", "-h"]
    /// The flag that asks for the version.
    static let versionFlag = "--version"
    /// Flags that are accepted and left to the caller (`--help`, `--version`).
    static let callerFlags: Set<String> = helpFlags.union([versionFlag])

    /// Takes the arguments after the program name
    /// (`CommandLine.arguments.dropFirst()`).
    init(_ arguments: [String]) {
        self.arguments = arguments
    }

    /// The arguments as `CommandLineArgumentsProvider` wants them: program
    /// name first (it always skips element 0).
    var providerArguments: [String] { ["protd"] + arguments }

    /// Whether `--help` or `-h` was given.
    var wantsHelp: Bool { arguments.contains { Self.helpFlags.contains($0) } }

    /// Whether `--version` was given.
    var wantsVersion: Bool { arguments.contains(Self.versionFlag) }

    /// Throws unless every argument belongs to a known flag, every
    /// single-value flag has exactly one value, and no key is given twice.
    func validate(keys: [ConfigurationKey]) throws {
        var keyForFlag: [String: ConfigurationKey] = [:]
        for key in keys {
            for flag in key.flags { keyForFlag[flag] = key }
        }

        struct Occurrence {
            var flag: String
            var key: ConfigurationKey?
            var values: [String]
        }
        var occurrences: [Occurrence] = []
        var open = false  // whether the last occurrence still takes values (`--flag v`, not `--flag=v`)

        for argument in arguments {
            if Self.callerFlags.contains(argument) {
                occurrences.append(Occurrence(flag: argument, key: nil, values: []))
                open = false
            } else if argument.hasPrefix("--") {
                let flag: String
                let inlineValue: String?
                if let equals = argument.firstIndex(of: "=") {
                    flag = String(argument[..<equals])
                    inlineValue = String(argument[argument.index(after: equals)...])
                } else {
                    flag = argument
                    inlineValue = nil
                }
                guard let key = keyForFlag[flag] else {
                    throw ConfigurationError(
                        .unknownFlag, key: flag,
                        message: "unknown flag \(flag) (protd --help lists the flags; each configuration key a.b-c is the flag --a-b-c)")
                }
                occurrences.append(Occurrence(flag: flag, key: key, values: inlineValue.map { [$0] } ?? []))
                open = inlineValue == nil
            } else if argument.hasPrefix("-") && Double(argument) == nil {
                throw ConfigurationError(
                    .unknownFlag, key: argument,
                    message: "unknown flag \(argument) (protd takes long flags such as --socket-path; see protd --help)")
            } else if open, let last = occurrences.indices.last {
                occurrences[last].values.append(argument)
            } else {
                throw ConfigurationError(
                    .unexpectedArgument, key: argument,
                    message: "unexpected argument \"\(argument)\" (protd takes no positional arguments; values follow their flag, as in --socket-path PATH)")
            }
        }

        var seen: [String: String] = [:]  // key name -> first flag that set it
        for occurrence in occurrences {
            guard let key = occurrence.key else {
                if let value = occurrence.values.first {
                    throw ConfigurationError(
                        .unexpectedArgument, key: value,
                        message: "unexpected argument \"\(value)\" after \(occurrence.flag)")
                }
                continue
            }
            if let previous = seen[key.name], !(key.isList && previous == occurrence.flag) {
                let how = previous == occurrence.flag ? "twice as \(previous)" : "as both \(previous) and \(occurrence.flag)"
                throw ConfigurationError(
                    .duplicateFlag, key: key.name,
                    message: "\(key.name) is given \(how) (give it once)")
            }
            seen[key.name] = occurrence.flag
            if !key.isList {
                if occurrence.values.isEmpty {
                    throw ConfigurationError(
                        .invalidValue, key: key.name,
                        message: "missing value for \(key.name): \(occurrence.flag) needs \(key.placeholder) (expected \(key.expected))")
                }
                if occurrence.values.count > 1 {
                    let given = occurrence.values.map { "\"\($0)\"" }.joined(separator: " ")
                    throw ConfigurationError(
                        .invalidValue, key: key.name,
                        message: "too many values for \(key.name): \(given) given by \(occurrence.flag) (expected one value: \(key.expected))")
                }
            }
        }
    }
}
