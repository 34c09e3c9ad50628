import CSodium
@testable import Sodium
import Testing

/// The per-message subkey construction over libsodium's AES-256-GCM. Runs
/// only where libsodium offers AES-256-GCM (AES-NI and PCLMUL).
@Suite("AES-256-GCM with random 24-byte nonces", .enabled(if: AES256GCMRandomNonce.isAvailable))
struct AES256GCMRandomNonceTests {
    private let plaintext = Array("segment content, long enough to span two AES blocks".utf8)
    private let additionalData: [UInt8] = [9, 8, 7]

    private func seal(_ plaintext: [UInt8], nonce: [UInt8], key: SecretBytes, ad: [UInt8]? = nil) throws -> [UInt8] {
        try AES256GCMRandomNonce.sealed(plaintext, nonce: nonce, key: key, ad: ad ?? additionalData)
    }

    private func open(_ sealed: [UInt8], nonce: [UInt8], key: SecretBytes, ad: [UInt8]? = nil) throws -> [UInt8] {
        try AES256GCMRandomNonce.opened(sealed, nonce: nonce, key: key, ad: ad ?? additionalData)
    }

    @Test("output is AES-256-GCM under BLAKE2b(key, label || nonce[0..<12]) with nonce[12..<24], as docs/FORMAT.md says")
    func matchesTheDocumentedConstruction() throws {
        let key = try SecretBytes.random(count: 32)
        let nonce = try SecureRandom.bytes(24)
        let subkey = try KeyedBlake2b.deriveKey(key: key, parts: [Array("protd.aes-256-gcm.subkey.v1".utf8), Array(nonce[..<12])])
        var expected = [UInt8](repeating: 0, count: plaintext.count + 16)
        try subkey.withUnsafeBytes { k in
            _ = crypto_aead_aes256gcm_encrypt(&expected, nil, plaintext, UInt64(plaintext.count), additionalData,
                                              UInt64(additionalData.count), nil, Array(nonce[12...]),
                                              k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        #expect(try seal(plaintext, nonce: nonce, key: key) == expected)
    }

    /// Computed independently of libsodium and of this code, with Python's
    /// hashlib.blake2b and the cryptography package's AESGCM (docs/FORMAT.md).
    @Test("the known-answer vector of docs/FORMAT.md seals and opens")
    func knownAnswer() throws {
        let key = try SecretBytes(count: 32) { buffer in
            for index in buffer.indices { buffer[index] = UInt8(index) }
        }
        let nonce = (0x40..<0x58).map { UInt8($0) }
        let ad = (0xA0..<0xB0).map { UInt8($0) } + [1, 0, 0, 0, 0, 0, 0, 0, 1]
        let expected = hexBytes("2b08be40b61160d88faba69a8c3a722e521f2ee5a24a35b30893749757c18452cd7000ff8f4617260098f6a846")
        let message = Array("protd AES-256-GCM test vector".utf8)
        #expect(try seal(message, nonce: nonce, key: key, ad: ad) == expected)
        #expect(try open(expected, nonce: nonce, key: key, ad: ad) == message)
    }

    @Test("round-trips, and rejects any flipped byte, other associated data, another key or another nonce")
    func roundTripAndTamper() throws {
        // Either half of the nonce matters: the first picks the subkey, the
        // second is GCM's nonce.
        try AES256GCMRandomNonce.expectRoundTripAndTamperRefused(plaintext, ad: additionalData, nonceBytes: [0, 11, 12, 23])
    }

    @Test("nonces that share GCM's 12 bytes but not the first 12 give unrelated keystreams")
    func subkeyPerNonce() throws {
        let key = try SecretBytes.random(count: 32)
        let nonce = try SecureRandom.bytes(24)
        var sibling = nonce
        sibling[0] ^= 0x80
        let zeros = [UInt8](repeating: 0, count: 64)
        // Sealing zeros exposes the keystream; one GCM key with one nonce
        // would give the same keystream twice.
        #expect(try seal(zeros, nonce: nonce, key: key).prefix(64) != seal(zeros, nonce: sibling, key: key).prefix(64))
    }

    @Test("wrong lengths are refused before libsodium runs")
    func lengthsChecked() throws {
        let key = try SecretBytes.random(count: 32)
        #expect(throws: SodiumError.self) { try seal(plaintext, nonce: [UInt8](repeating: 0, count: 12), key: key) }
        #expect(throws: SodiumError.self) { try seal(plaintext, nonce: try SecureRandom.bytes(24), key: try SecretBytes.random(count: 16)) }
        #expect(throws: SodiumError.self) { try open([1, 2, 3], nonce: try SecureRandom.bytes(24), key: key) }
    }

    @Test("the subkey and round keys live in guarded scratch memory that is zero once a call is done")
    func scratchIsGuardedAndZeroed() throws {
        let key = try SecretBytes.random(count: 32)
        for _ in 0..<3 { _ = try seal(plaintext, nonce: try SecureRandom.bytes(24), key: key) }
        let (kept, allGuardedAndZero) = AES256GCMRandomNonce.scratchesForTesting.withKeptScratchesForTesting { scratches in
            (scratches.count, scratches.allSatisfy { scratch in
                scratch.protection == .readWrite
                    && UnsafeRawBufferPointer(start: scratch.base, count: scratch.byteCount).allSatisfy { $0 == 0 }
            })
        }
        #expect(kept >= 1)
        #expect(allGuardedAndZero)
    }
}
