import CSodium
import Sodium
import Testing

@Suite("SIV sealing and base64url names")
struct SyntheticIVTests {
    private let macKey = try! SecretBytes.random(count: 32)
    private let encryptionKey = try! SecretBytes.random(count: 32)

    private func seal(_ text: String, _ context: String) throws -> [UInt8] {
        try SyntheticIV.seal(Array(text.utf8), context: Array(context.utf8), macKey: macKey, encryptionKey: encryptionKey)
    }

    private func open(_ sealed: [UInt8], _ context: String) throws -> [UInt8] {
        try SyntheticIV.open(sealed, context: Array(context.utf8), macKey: macKey, encryptionKey: encryptionKey)
    }

    @Test("the same plaintext and context seal the same way, and open again; other plaintexts or contexts seal differently")
    func deterministic() throws {
        let sealed = try seal("payroll.csv", "dir")
        #expect(try seal("payroll.csv", "dir") == sealed)
        #expect(sealed.count == SyntheticIV.ivByteCount + "payroll.csv".utf8.count)
        #expect(try open(sealed, "dir") == Array("payroll.csv".utf8))
        #expect(try seal("payroll.csw", "dir") != sealed)
        #expect(try seal("payroll.csv", "dir2") != sealed)
        // The plaintext does not show through.
        #expect(!sealed.indices.contains { sealed[$0...].starts(with: Array("payroll".utf8)) })
    }

    @Test("seal is the construction docs/FORMAT.md states, computed here with libsodium directly")
    func knownConstruction() throws {
        let macText = "an SIV MAC key of 32 bytes long!", encryptionText = "an SIV XChaCha20 key, 32 bytes.."
        let macKey = try SecretBytes(utf8: macText), encryptionKey = try SecretBytes(utf8: encryptionText)
        for (plaintext, context) in [("payroll.csv", "\u{2}dir"), (String(repeating: "p", count: 200), ""), ("x", "\u{1}")] {
            let plainBytes = Array(plaintext.utf8), contextBytes = Array(context.utf8)
            // iv = keyed BLAKE2b-128(macKey, len(context) u32 LE || context || plaintext)
            let count = UInt32(contextBytes.count)
            let input = [UInt8(count & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count >> 16 & 0xFF), UInt8(count >> 24)]
                + contextBytes + plainBytes
            var iv = [UInt8](repeating: 0, count: 16)
            let macBytes = Array(macText.utf8), encryptionBytes = Array(encryptionText.utf8)
            _ = crypto_generichash(&iv, 16, input, UInt64(input.count), macBytes, macBytes.count)
            // sealed = iv || XChaCha20(encryptionKey, iv || 0^8) XOR plaintext
            var body = [UInt8](repeating: 0, count: plainBytes.count)
            _ = crypto_stream_xchacha20_xor(&body, plainBytes, UInt64(plainBytes.count), iv + [UInt8](repeating: 0, count: 8),
                                            encryptionBytes)
            let sealed = try SyntheticIV.seal(plainBytes, context: contextBytes, macKey: macKey, encryptionKey: encryptionKey)
            #expect(sealed == iv + body)
            #expect(try SyntheticIV.open(iv + body, context: contextBytes, macKey: macKey, encryptionKey: encryptionKey) == plainBytes)
        }
    }

    @Test("a sealed value opened under another context, other keys, or with any byte flipped is refused")
    func refusals() throws {
        let sealed = try seal("secret-name", "parent/a")
        #expect(throws: SodiumError.self) { try open(sealed, "parent/b") }
        #expect(throws: SodiumError.self) { try open(sealed, "parent/a/") }
        #expect(throws: SodiumError.self) {
            try SyntheticIV.open(sealed, context: Array("parent/a".utf8), macKey: SecretBytes.random(count: 32),
                                 encryptionKey: encryptionKey)
        }
        for index in sealed.indices {
            var flipped = sealed
            flipped[index] ^= 0x01
            #expect(throws: SodiumError.self) { try open(flipped, "parent/a") }
        }
        #expect(throws: SodiumError.self) { try open(Array(sealed.prefix(15)), "parent/a") }
        // Context and plaintext are length-delimited: moving bytes between them changes the IV.
        #expect(try seal("bc", "a") != seal("c", "ab"))
    }

    @Test("base64url round-trips, uses only letters, digits, - and _, and refuses every other spelling")
    func base64url() throws {
        for count in 0..<70 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 13) }
            let text = Base64URL.encode(bytes)
            #expect(text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
            #expect(Base64URL.decode(text) == bytes)
        }
        #expect(Base64URL.decode("AA==") == nil, "padding is not the canonical spelling")
        #expect(Base64URL.decode("AB") == nil, "non-zero trailing bits spell the same byte a second way")
        #expect(Base64URL.decode("A+") == nil && Base64URL.decode("a.b") == nil && Base64URL.decode("A") == nil)
    }
}
