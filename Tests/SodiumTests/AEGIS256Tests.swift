import Sodium
import Testing

/// libsodium's AEGIS-256 behind protd's AEAD interface. Runs only where
/// protd uses it (AES instructions, libsodium 1.0.19 or later).
@Suite("AEGIS-256", .enabled(if: AEGIS256.isAvailable))
struct AEGIS256Tests {
    private let plaintext = Array("segment content, long enough to span two AES blocks".utf8)
    private let additionalData: [UInt8] = [9, 8, 7]

    private func seal(_ plaintext: [UInt8], nonce: [UInt8], key: SecretBytes, ad: [UInt8]? = nil) throws -> [UInt8] {
        try AEGIS256.sealed(plaintext, nonce: nonce, key: key, ad: ad ?? additionalData)
    }

    private func open(_ sealed: [UInt8], nonce: [UInt8], key: SecretBytes, ad: [UInt8]? = nil) throws -> [UInt8] {
        try AEGIS256.opened(sealed, nonce: nonce, key: key, ad: ad ?? additionalData)
    }

    /// Test vectors 1 and 3 of draft-irtf-cfrg-aegis-aead, appendix A.3
    /// (AEGIS-256), with the 256-bit tag; docs/FORMAT.md cites them.
    @Test("the draft's AEGIS-256 test vectors seal and open", arguments: [
        ("", "00000000000000000000000000000000",
         "754fc3d8c973246dcc6d741412a4b236" + "1181a1d18091082bf0266f66297d167d2e68b845f61a3b0527d31fc7b7b89f13"),
        ("0001020304050607", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
         "f373079ed84b2709faee373584585d60accd191db310ef5d8b11833df9dec711"
             + "b7d28d0c3c0ebd409fd22b44160503073a547412da0854bfb9723020dab8da1a"),
    ])
    func draftVectors(ad: String, message: String, expected: String) throws {
        let key = try SecretBytes(count: 32) { buffer in
            for index in buffer.indices { buffer[index] = 0 }
            buffer[0] = 0x10
            buffer[1] = 0x01
        }
        let nonce = hexBytes("1000020000000000000000000000000000000000000000000000000000000000")
        #expect(try seal(hexBytes(message), nonce: nonce, key: key, ad: hexBytes(ad)) == hexBytes(expected))
        #expect(try open(hexBytes(expected), nonce: nonce, key: key, ad: hexBytes(ad)) == hexBytes(message))
    }

    @Test("round-trips, and rejects any flipped byte, other associated data, another key or another nonce")
    func roundTripAndTamper() throws {
        let sealed = try AEGIS256.expectRoundTripAndTamperRefused(plaintext, ad: additionalData, nonceBytes: [0, 23, 24, 31])
        #expect(sealed.count == plaintext.count + 32)
    }

    @Test("a failed open leaves the output zeroed")
    func failedOpenClearsOutput() throws {
        let key = try SecretBytes.random(count: 32)
        let nonce = try SecureRandom.bytes(32)
        var sealed = try seal(plaintext, nonce: nonce, key: key)
        sealed[sealed.count - 1] ^= 0x01
        var output = [UInt8](repeating: 0xAA, count: plaintext.count)
        #expect(throws: SodiumError.self) {
            try sealed.withUnsafeBytes { s in try additionalData.withUnsafeBytes { a in try nonce.withUnsafeBytes { n in
                try output.withUnsafeMutableBytes { try AEGIS256.open(s, additionalData: a, nonce: n, key: key, into: $0) }
            } } }
        }
        #expect(output.allSatisfy { $0 == 0 })
    }

    @Test("wrong lengths are refused before libsodium runs")
    func lengthsChecked() throws {
        let key = try SecretBytes.random(count: 32)
        #expect(AEGIS256.nonceByteCount == 32 && AEGIS256.tagByteCount == 32)
        #expect(throws: SodiumError.self) { try seal(plaintext, nonce: try SecureRandom.bytes(24), key: key) }
        #expect(throws: SodiumError.self) { try seal(plaintext, nonce: try SecureRandom.bytes(32), key: try SecretBytes.random(count: 16)) }
        #expect(throws: SodiumError.self) { try open([1, 2, 3], nonce: try SecureRandom.bytes(32), key: key) }
    }
}
