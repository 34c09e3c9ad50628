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
}
