import Sodium

/// Array-in, array-out sealing and opening for the content-cipher suites.
extension RandomNonceAEAD {
    /// `plaintext` sealed under `key` and `nonce` with associated data `ad`: ciphertext then tag.
    static func sealed(_ plaintext: [UInt8], nonce: [UInt8], key: SecretBytes, ad: [UInt8]) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        try plaintext.withUnsafeBytes { p in try ad.withUnsafeBytes { a in try nonce.withUnsafeBytes { n in
            try output.withUnsafeMutableBytes { try seal(p, additionalData: a, nonce: n, key: key, into: $0) }
        } } }
        return output
    }

    /// `sealed` verified and decrypted; throws what `open` throws.
    static func opened(_ sealed: [UInt8], nonce: [UInt8], key: SecretBytes, ad: [UInt8]) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: max(0, sealed.count - tagByteCount))
        try sealed.withUnsafeBytes { s in try ad.withUnsafeBytes { a in try nonce.withUnsafeBytes { n in
            try output.withUnsafeMutableBytes { try open(s, additionalData: a, nonce: n, key: key, into: $0) }
        } } }
        return output
    }
}

/// The bytes a string of hex digits (two per byte) spells.
func hexBytes(_ hex: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        result.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return result
}
