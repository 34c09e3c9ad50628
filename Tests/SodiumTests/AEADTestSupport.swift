import Sodium
import Testing

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

extension RandomNonceAEAD {
    /// Seals `plaintext` under a fresh random key and nonce, expects it to
    /// open again, and expects every flipped byte of the result, other
    /// associated data, another key and a flip of each of `nonceBytes` to be
    /// refused. Returns the sealed bytes.
    @discardableResult
    static func expectRoundTripAndTamperRefused(_ plaintext: [UInt8], ad: [UInt8], nonceBytes: [Int],
                                                sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
        let key = try SecretBytes.random(count: 32)
        let nonce = try SecureRandom.bytes(nonceByteCount)
        let sealed = try sealed(plaintext, nonce: nonce, key: key, ad: ad)
        #expect(try opened(sealed, nonce: nonce, key: key, ad: ad) == plaintext, sourceLocation: sourceLocation)
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x01
            #expect(throws: SodiumError.self, sourceLocation: sourceLocation) {
                try opened(tampered, nonce: nonce, key: key, ad: ad)
            }
        }
        #expect(throws: SodiumError.self, sourceLocation: sourceLocation) {
            try opened(sealed, nonce: nonce, key: key, ad: ad.isEmpty ? [1] : ad.dropLast() + [ad.last! ^ 0x01])
        }
        #expect(throws: SodiumError.self, sourceLocation: sourceLocation) {
            try opened(sealed, nonce: nonce, key: try SecretBytes.random(count: 32), ad: ad)
        }
        for index in nonceBytes {
            var other = nonce
            other[index] ^= 0x01
            #expect(throws: SodiumError.self, sourceLocation: sourceLocation) {
                try opened(sealed, nonce: other, key: key, ad: ad)
            }
        }
        return sealed
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
