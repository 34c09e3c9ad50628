import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

/// A store's cipher applies to new files only: every file records its own
/// in the header's algorithm byte and stays readable and writable whatever
/// the store is set to now.
@Suite("Content ciphers")
struct ContentCipherTests {
    /// The algorithm byte (offset 5) of `name`'s header.
    private func algorithmByte(_ fixture: StoreFixture, _ name: String) throws -> UInt8 {
        let path = try fixture.diskPath(name)
        return try Data(contentsOf: URL(fileURLWithPath: path))[5]
    }

    @Test("new files record the store's cipher; a store set to another reads, rewrites, resizes and reclassifies them",
          arguments: StoreFixture.ciphers)
    func filesKeepTheirCipher(cipher: ContentCipher) throws {
        let fixture = try StoreFixture(segmentSize: 1024, cipher: cipher)
        let content = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        for other in StoreFixture.ciphers {
            try fixture.store.write(content, to: fixture.name("old-\(other)"), in: fixture.namespace)
            #expect(try algorithmByte(fixture, "old-\(other)") == cipher.rawValue)
        }
        fixture.store.shutdown()

        for other in StoreFixture.ciphers {
            var configuration = fixture.configuration
            configuration.cipher = other
            let store = try fixture.reopen(configuration)
            defer { store.shutdown() }
            let old = fixture.name("old-\(other)")
            #expect(try store.read(old, in: fixture.namespace) == content)
            let handle = try store.open(old, in: fixture.namespace, mode: .existing)
            try handle.write([1, 2, 3], at: 1500)
            try handle.truncate(to: 4000)
            _ = try handle.append([9, 9])
            handle.close()
            try store.setProtection(.none, of: old, in: fixture.namespace)
            var expected = Array(content[..<4000]) + [9, 9]
            expected.replaceSubrange(1500..<1503, with: [1, 2, 3])
            #expect(try store.read(old, in: fixture.namespace) == expected)
            #expect(try algorithmByte(fixture, "old-\(other)") == cipher.rawValue, "an existing file keeps its cipher")
            try store.write(content, to: fixture.name("new-\(other)"), in: fixture.namespace)
            #expect(try algorithmByte(fixture, "new-\(other)") == other.rawValue, "a new file takes the store's cipher")
            try store.write(content, to: old, in: fixture.namespace)
            #expect(try algorithmByte(fixture, "old-\(other)") == other.rawValue, "a whole-file write makes a new file")
        }
    }

    @Test("changing the algorithm byte to any other cipher's, or to an unknown one, is detected as tampering",
          arguments: StoreFixture.ciphers)
    func algorithmSwapDetected(cipher: ContentCipher) throws {
        let fixture = try StoreFixture(segmentSize: 1024, cipher: cipher)
        try fixture.store.write(Array("secret".utf8), to: fixture.name("a"), in: fixture.namespace)
        let path = try fixture.diskPath("a")
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        for other in ContentCipher.allCases.map(\.rawValue) + [0, 4, 255] where other != cipher.rawValue {
            var bytes = original
            bytes[5] = other
            try bytes.write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: ProtectionError.self, "algorithm \(other)") {
                try fixture.store.read(fixture.name("a"), in: fixture.namespace)
            }
            #expect(error?.code == .integrityFailure, "algorithm \(other)")
        }
    }

    @Test("configuration names round-trip, and the preferred cipher is one this CPU runs")
    func names() {
        for cipher in ContentCipher.allCases {
            #expect(ContentCipher(name: cipher.description) == cipher)
        }
        #expect(ContentCipher(name: "aes") == nil)
        #expect(ContentCipher(name: "aegis") == nil)
        #expect(ContentCipher.xChaCha20Poly1305.isAvailable)
        #expect(ContentCipher.preferred.isAvailable)
    }
}
