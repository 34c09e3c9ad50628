internal import Sodium

/// Random hex names for temporary files.
enum SecureRandomName {
    /// 16 random bytes as 32 hex digits.
    static func make() throws -> String {
        try SecureRandom.bytes(16).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Whether `name` is `prefix` followed by a name `make()` could have
    /// made (32 lowercase hex digits), and nothing else.
    static func matches(_ name: String, prefix: String) -> Bool {
        guard name.hasPrefix(prefix) else { return false }
        let suffix = name.utf8.dropFirst(prefix.utf8.count)
        return suffix.count == 32 && suffix.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
