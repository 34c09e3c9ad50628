import Sodium
import Testing

@Suite("libsodium primitives")
struct PrimitiveTests {
    @Test("XChaCha20-Poly1305 round-trips and rejects any flipped byte or wrong associated data")
    func aeadRoundTripAndTamper() throws {
        let key = try SecretBytes.random(count: 32)
        let secret = try SecretBytes(utf8: "a file key of some length")
        let wrapped = try XChaCha20Poly1305.wrap(secret, additionalData: [1, 2, 3], key: key)
        #expect(wrapped.count == 24 + secret.count + 16)
        let opened = try XChaCha20Poly1305.unwrap(wrapped, additionalData: [1, 2, 3], key: key)
        #expect(try opened.constantTimeEquals(secret))
        for index in wrapped.indices {
            var tampered = wrapped
            tampered[index] ^= 0x01
            #expect(throws: SodiumError.self) {
                try XChaCha20Poly1305.unwrap(tampered, additionalData: [1, 2, 3], key: key)
            }
        }
        #expect(throws: SodiumError.self) { try XChaCha20Poly1305.unwrap(wrapped, additionalData: [1, 2, 4], key: key) }
        #expect(throws: SodiumError.self) {
            try XChaCha20Poly1305.unwrap(wrapped, additionalData: [1, 2, 3], key: try SecretBytes.random(count: 32))
        }
    }

    @Test("two wraps of the same key use different nonces")
    func wrapsDiffer() throws {
        let key = try SecretBytes.random(count: 32)
        let secret = try SecretBytes.random(count: 32)
        #expect(try XChaCha20Poly1305.wrap(secret, additionalData: [], key: key)
                != XChaCha20Poly1305.wrap(secret, additionalData: [], key: key))
    }

    @Test("a sealed box opens only with the matching private key")
    func sealedBox() throws {
        let pair = try X25519KeyPair.generate()
        let other = try X25519KeyPair.generate()
        let secret = try SecretBytes.random(count: 32)
        let sealed = try SealedBox.seal(secret, to: pair.publicKey)
        #expect(sealed.count == 32 + SealedBox.overheadByteCount)
        #expect(try SealedBox.open(sealed, with: pair).constantTimeEquals(secret))
        #expect(throws: SodiumError.self) { try SealedBox.open(sealed, with: other) }
    }

    @Test("Argon2id is deterministic per salt and passcode, and differs otherwise")
    func argon2id() throws {
        let salt = [UInt8](repeating: 1, count: 16)
        let passcode = try SecretBytes(utf8: "1234")
        let a = try Argon2id.deriveKey(passcode: passcode, salt: salt, cost: .minimum)
        let b = try Argon2id.deriveKey(passcode: passcode, salt: salt, cost: .minimum)
        let otherSalt = try Argon2id.deriveKey(passcode: passcode, salt: [UInt8](repeating: 2, count: 16), cost: .minimum)
        let otherPass = try Argon2id.deriveKey(passcode: try SecretBytes(utf8: "1235"), salt: salt, cost: .minimum)
        #expect(try a.constantTimeEquals(b))
        #expect(try !a.constantTimeEquals(otherSalt))
        #expect(try !a.constantTimeEquals(otherPass))
    }

    @Test("Argon2id refuses costs outside libsodium's limits and short salts")
    func argon2idValidation() throws {
        let passcode = try SecretBytes(utf8: "1234")
        #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(passcode: passcode, salt: [UInt8](repeating: 0, count: 16),
                                   cost: .init(operations: 0, memoryBytes: 8192))
        }
        #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(passcode: passcode, salt: [UInt8](repeating: 0, count: 16),
                                   cost: .init(operations: 1, memoryBytes: 16))
        }
        #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(passcode: passcode, salt: [1, 2, 3], cost: .minimum)
        }
    }

    @Test("keyed BLAKE2b depends on key and message")
    func keyedBlake2b() throws {
        let key = try SecretBytes.random(count: 32)
        let tag = try KeyedBlake2b.mac(key: key, parts: [[1, 2], [3]])
        #expect(KeyedBlake2b.tagsEqual(tag, try KeyedBlake2b.mac(key: key, parts: [[1, 2, 3]])))
        #expect(!KeyedBlake2b.tagsEqual(tag, try KeyedBlake2b.mac(key: key, parts: [[1, 2, 4]])))
        #expect(!KeyedBlake2b.tagsEqual(tag, try KeyedBlake2b.mac(key: try SecretBytes.random(count: 32), parts: [[1, 2, 3]])))
        let derived = try KeyedBlake2b.deriveKey(key: key, parts: [[9]])
        #expect(try derived.constantTimeEquals(try KeyedBlake2b.deriveKey(key: key, parts: [[9]])))
    }

    @Test("keyed BLAKE2b matches the RFC 7693 / libsodium reference vector")
    func blake2bKnownAnswer() throws {
        // BLAKE2b-512, key = 00..3f, message = empty (libsodium test/default/generichash.c, first vector).
        let key = try SecretBytes(count: 64) { buffer in
            for index in 0..<64 { buffer[index] = UInt8(index) }
        }
        let tag = try KeyedBlake2b.mac(key: key, parts: [], length: 64)
        let hex = tag.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        #expect(hex == "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568")
    }
}
