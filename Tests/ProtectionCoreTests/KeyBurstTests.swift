import Foundation
import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

@Suite("Key work in one burst")
struct KeyBurstTests {
    @Test("opening, reading and closing a small file inside withKeyMemoryOpen changes page protection at most once each way",
          arguments: [ProtectionClass.none, .completeUntilFirstUserAuthentication, .complete])
    func smallReadInOneBurst(protection: ProtectionClass) throws {
        let fixture = try StoreFixture()
        let name = fixture.name("small")
        let content = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try fixture.store.write(content, to: name, in: fixture.namespace, protection: protection)

        let before = SecretBytes.protectionChangesOnThisThread
        let readBack = try fixture.store.withKeyMemoryOpen {
            let handle = try fixture.store.open(name, in: fixture.namespace, mode: .existing)
            defer { handle.close() }
            return try handle.read(offset: 0, count: 1 << 20)
        }
        let changes = SecretBytes.protectionChangesOnThisThread - before
        #expect(readBack == content)
        // Unwrapping the file key, opening its segments and wiping it at the
        // close each change it otherwise (six changes in all). A file key
        // lands in the class keys' slab unless that slab is full, which only
        // a thousand keys alive at once in this test process can do.
        if SecretBytes.slabStatistics.slabCount - SecretBytes.slabStatistics.emptySlabCount <= 1 {
            #expect(changes <= 2, "\(changes) page protection changes")
        }

        // The same calls apart: the counter counts what the burst saves.
        let apartBefore = SecretBytes.protectionChangesOnThisThread
        let handle = try fixture.store.open(name, in: fixture.namespace, mode: .existing)
        #expect(try handle.read(offset: 0, count: 1 << 20) == content)
        handle.close()
        #expect(SecretBytes.protectionChangesOnThisThread - apartBefore > changes)
    }

    @Test("opening a missing name for reading creates none of its directories")
    func readingAMissingNestedNameCreatesNothing() throws {
        let fixture = try StoreFixture()
        let missing = fixture.name("a/b/missing")
        #expect(throws: ProtectionError.self) {
            try fixture.store.open(missing, in: fixture.namespace, mode: .existing)
        }
        let files = fixture.directory.path + "/store/\(fixture.namespace.uid)/files"
        #expect(!FileManager.default.fileExists(atPath: files + "/a"))
        // A create still makes them.
        let handle = try fixture.store.open(fixture.name("a/b/new"), in: fixture.namespace, mode: .createNew(.none))
        handle.close()
        #expect(FileManager.default.fileExists(atPath: files + "/a/b/new"))
    }
}
