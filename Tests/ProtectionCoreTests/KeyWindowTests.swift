import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// While a key is readable (its slab is out of `PROT_NONE`), every other
/// key in its slab is readable too, so key windows are kept to crypto:
/// no disk I/O runs inside one (docs/SECURITY.md). `Posix` counts, in
/// debug builds, each I/O call the calling thread makes inside a window.
@Suite("No key window spans disk I/O")
struct KeyWindowTests {
    /// An unlocked store, so every class's key is in memory.
    private func unlockedFixture(_ cipher: ContentCipher) throws -> StoreFixture {
        let fixture = try StoreFixture(segmentSize: 1024, cipher: cipher)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        return fixture
    }

    @Test("writing, reading, changing and reopening files does no disk I/O inside a key window",
          arguments: StoreFixture.ciphers, ProtectionClass.allCases)
    func fileOperations(cipher: ContentCipher, protection: ProtectionClass) throws {
        let fixture = try unlockedFixture(cipher)
        let (store, namespace, name) = (fixture.store, fixture.namespace, fixture.name("dir/file"))
        let content = (0..<5000).map { UInt8(truncatingIfNeeded: $0) }
        let before = Posix.ioInsideKeyWindowOnThisThread
        try store.write(content, to: name, in: namespace, protection: protection, durable: true)
        #expect(try store.read(name, in: namespace) == content)
        #expect(try store.read(name, in: namespace, offset: 1000, count: 100) == Array(content[1000..<1100]))
        let handle = try store.open(name, in: namespace, mode: .existing)
        try handle.write([1, 2, 3], at: 2047)
        try handle.write([4], at: 9000)
        _ = try handle.append([5, 6])
        try handle.truncate(to: 3000)
        try handle.truncate(to: 4000)
        #expect(try handle.read(offset: 2046, count: 5) == [content[2046], 1, 2, 3, content[2050]])
        try handle.sync()
        handle.close()
        let other: ProtectionClass = protection == .none ? .complete : .none
        try store.setProtection(other, of: name, in: namespace)
        #expect(try store.read(name, in: namespace).count == 4000)
        try store.delete(name, in: namespace)
        #expect(Posix.ioInsideKeyWindowOnThisThread - before == 0)
    }

    @Test("the I/O counter sees a read that runs inside a key window")
    func counterSeesIOInsideAWindow() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([1, 2, 3], to: fixture.name("a"), in: fixture.namespace)
        let key = try SecretBytes.random(count: 32)
        let before = Posix.ioInsideKeyWindowOnThisThread
        let read = try key.withUnsafeBytes { _ in try fixture.store.read(fixture.name("a"), in: fixture.namespace) }
        #expect(read == [1, 2, 3])
        #expect(Posix.ioInsideKeyWindowOnThisThread - before > 0)
    }
}
