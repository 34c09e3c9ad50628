internal import CSodium

/// RFC 4648 base64url without padding (libsodium's codec), for names on
/// disk: letters, digits, `-` and `_` only.
public enum Base64URL {
    /// The encoding of `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        let variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING
        let capacity = sodium_base64_encoded_len(bytes.count, variant)  // with the closing NUL
        return String(unsafeUninitializedCapacity: capacity) { text in
            text.withMemoryRebound(to: CChar.self) { _ = sodium_bin2base64($0.baseAddress!, capacity, bytes, bytes.count, variant) }
            return capacity - 1
        }
    }

    /// The bytes `text` encodes, or `nil` unless `text` is exactly what
    /// `encode` gives for them (one spelling per value).
    public static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        var bytes = [UInt8](repeating: 0, count: input.count * 3 / 4 + 1)
        var length = 0
        let status = input.withUnsafeBufferPointer { chars in
            chars.withMemoryRebound(to: CChar.self) { text in
                sodium_base642bin(&bytes, bytes.count, text.baseAddress, text.count, nil, &length, nil,
                                  sodium_base64_VARIANT_URLSAFE_NO_PADDING)
            }
        }
        guard status == 0 else { return nil }
        let decoded = Array(bytes[..<length])
        return encode(decoded) == text ? decoded : nil
    }
}
