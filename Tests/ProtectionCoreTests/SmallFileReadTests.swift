import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// `readSmallFile` answers a file of at most its limit in one go and leaves
/// larger files, and files a handle has open, to the usual open path.
@Suite("Small files read in one go")
struct SmallFileReadTests {
    /// `readSmallFile` with a limit, returning the bytes it decrypted.
    private func readSmall(_ fixture: StoreFixture, _ name: String, offset: Int = 0, count: Int = .max,
                           limit: Int) throws -> [UInt8]? {
        try fixture.store.readSmallFile(fixture.name(name), in: fixture.namespace, offset: offset, count: count,
                                        ifAtMost: limit) { count, fill in
            try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                try fill(UnsafeMutableRawBufferPointer(buffer))
                initialized = count
            }
        }
    }

    @Test("a file at the limit is read whole, or in any range; one byte over is left to open",
          arguments: StoreFixture.ciphers)
    func limit(cipher: ContentCipher) throws {
        let fixture = try StoreFixture(segmentSize: 1024, cipher: cipher)
        let content = (0..<4096).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try fixture.store.write(content, to: fixture.name("f"), in: fixture.namespace)
        #expect(try readSmall(fixture, "f", limit: 4096) == content)
        #expect(try readSmall(fixture, "f", offset: 2000, count: 1500, limit: 4096) == Array(content[2000..<3500]))
        #expect(try readSmall(fixture, "f", offset: 4000, count: 500, limit: 4096) == Array(content[4000...]))
        #expect(try readSmall(fixture, "f", offset: 5000, count: 1, limit: 4096) == [])
        #expect(try readSmall(fixture, "f", limit: 4095) == nil)
        #expect(try fixture.store.read(fixture.name("f"), in: fixture.namespace) == content)
    }

    @Test("a small file's read makes no slab writable, in every class, with the slabs full of other keys too",
          arguments: ProtectionClass.allCases)
    func readOnlyKeyWindow(protection: ProtectionClass) throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let content = (0..<3000).map { UInt8(truncatingIfNeeded: $0 * 3) }
        try fixture.store.write(content, to: fixture.name("f"), in: fixture.namespace, protection: protection)
        // More keys than a slab holds, as with many open handles: a file key
        // made in a slab would now land in another slab than the class key.
        let others = try (0..<1100).map { _ in try SecretBytes.random(count: 32) }
        let before = SecretBytes.slabWritesOnThisThread
        #expect(try readSmall(fixture, "f", limit: 4096) == content)
        #expect(SecretBytes.slabWritesOnThisThread == before)
        withExtendedLifetime(others) {}
    }

    @Test("while a handle has the file open, it is left to the open path, which sees the handle's writes")
    func openHandle() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([1, 2, 3], to: fixture.name("f"), in: fixture.namespace)
        let handle = try fixture.store.open(fixture.name("f"), in: fixture.namespace, mode: .existing)
        try handle.write([9], at: 1)
        #expect(try readSmall(fixture, "f", limit: 1 << 20) == nil)
        #expect(try fixture.store.read(fixture.name("f"), in: fixture.namespace) == [1, 9, 3])
        handle.close()
        #expect(try readSmall(fixture, "f", limit: 1 << 20) == [1, 9, 3])
    }
}
