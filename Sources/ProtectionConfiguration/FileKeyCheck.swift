internal import Configuration
internal import Glibc
internal import ProtectionCore

/// Checks on the configuration file that `FileProvider` does not make.
enum FileKeyCheck {
    /// Refuses a file that holds keys protd does not read, so a typo such as
    /// `passcode.erase-after-failed-attempt: 10` stops the daemon instead of
    /// being silently ignored.
    ///
    /// Why an adapter: `YAMLSnapshot` keeps its key list internal. Its
    /// `description` ends in `[N values]`, and its `debugDescription` lists
    /// `key=value` pairs; this compares N with the number of known keys found
    /// and names the others from the list. Should either format change, the
    /// check quietly does nothing rather than refuse a good file.
    static func refuseUnknownKeys(
        in file: some ConfigProvider & CustomStringConvertible & CustomDebugStringConvertible,
        path: String, known: [ConfigurationKey]
    ) throws {
        guard let total = valueCount(file.description) else { return }
        var present = 0
        for key in known {
            do {
                let type: ConfigType = key.isList ? .stringArray : .string
                if try file.value(forKey: AbsoluteConfigKey(key.components), type: type).value != nil {
                    present += 1
                }
            } catch {
                present += 1  // there, but of another shape: the value check reports it
            }
        }
        guard total > present else { return }
        let names = unknownNames(file.debugDescription, known: Set(known.map(\.name)))
        let hint = "protd --help lists the keys; check the spelling"
        if names.isEmpty {
            throw ConfigurationError(
                .unknownKey, key: ConfigurationKey.configFile.name,
                message: "\(path) holds \(total - present) key(s) protd does not know (\(hint))")
        }
        throw ConfigurationError(
            .unknownKey, key: names[0],
            message: "unknown key \(names.joined(separator: ", ")) in \(path) (\(hint))")
    }

    /// N from a description ending in `[N values]`.
    static func valueCount(_ description: String) -> Int? {
        guard description.hasSuffix(" values]"), let open = description.lastIndex(of: "[") else { return nil }
        let number = description[description.index(after: open)...].dropLast(" values]".count)
        return Int(number)
    }

    /// Key names from `NAME[N values: k=v, k=v]` that are not in `known`.
    static func unknownNames(_ debugDescription: String, known: Set<String>) -> [String] {
        guard let open = debugDescription.firstIndex(of: "["), debugDescription.hasSuffix("]") else { return [] }
        let inside = debugDescription[debugDescription.index(after: open)...].dropLast()
        guard let colon = inside.firstRange(of: ": ") else { return [] }
        let keyCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        var names: Set<String> = []
        for entry in inside[colon.upperBound...].split(separator: ", ") {
            guard let equals = entry.firstIndex(of: "=") else { continue }
            let name = String(entry[..<equals])
            if !name.isEmpty, name.allSatisfy(keyCharacters.contains), !known.contains(name) {
                names.insert(name)
            }
        }
        return names.sorted()
    }

    /// Whether the file holds nothing but blank lines, comments and YAML
    /// document markers (a configuration that sets nothing).
    static func hasNoContent(_ path: String) -> Bool {
        guard let bytes = contents(of: path) else { return false }
        let text = String(decoding: bytes, as: UTF8.self)
        return text.split(whereSeparator: \.isNewline).allSatisfy { line in
            let trimmed = line.drop(while: \.isWhitespace)
            return trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed == "---" || trimmed == "..."
        }
    }

    /// The file's bytes, or nil when it cannot be read (at most 1 MiB).
    private static func contents(of path: String) -> [UInt8]? {
        try? Posix.contents(of: path, atMost: 1 << 20)
    }
}
