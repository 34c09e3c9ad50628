import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

@Suite("Handles: sharing, invalidation, limits")
struct HandleTests {
    private func unlockedFixture() throws -> StoreFixture {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        return fixture
    }

    @Test("two handles on one file see each other's writes and one size")
    func handlesShareOneFile() throws {
        let fixture = try unlockedFixture()
        let name = fixture.name("shared")
        let first = try fixture.store.open(name, in: fixture.namespace, mode: .createNew(.completeUnlessOpen))
        let second = try fixture.store.open(name, in: fixture.namespace, mode: .existing)
        try first.append([UInt8](repeating: 1, count: 1500))
        try second.append([UInt8](repeating: 2, count: 1500))
        #expect(try first.size() == 3000)
        #expect(try first.read(offset: 1499, count: 2) == [1, 2])
        first.close()
        #expect(try second.size() == 3000)
        second.close()
        #expect(fixture.store.openHandleCount == 0)
        #expect(try fixture.store.read(name, in: fixture.namespace).count == 3000)
    }

    @Test("a file moved into class A while open is invalidated at the next lock")
    func classChangeFollowsOpenHandles() throws {
        let fixture = try unlockedFixture()
        let name = fixture.name("promoted")
        let handle = try fixture.store.open(name, in: fixture.namespace, mode: .createNew(.completeUntilFirstUserAuthentication))
        try fixture.store.setProtection(.complete, of: name, in: fixture.namespace)
        #expect(handle.protection == .complete)
        _ = try fixture.store.requestLock(grace: .zero)
        #expect((#expect(throws: ProtectionError.self) { try handle.size() })?.code == .protectedDataUnavailable)
    }

    @Test("a lock does not wait for a class A handle's truncate that grows the file by gigabytes: the truncate stops")
    func lockStopsALongGrowth() throws {
        let fixture = try StoreFixture()
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        let handle = try fixture.store.open(fixture.name("growing"), in: fixture.namespace, mode: .createNew(.complete))
        /// Written by the truncate's thread, read after `done.wait()`.
        final class Outcome: @unchecked Sendable { var result: Result<Void, any Error>? }
        let outcome = Outcome()
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            outcome.result = Result { try handle.truncate(to: 4 << 30) }
        }
        Thread.sleep(forTimeInterval: 0.2)
        let start = ContinuousClock.now
        _ = try fixture.store.requestLock(grace: .zero)
        let lockTook = ContinuousClock.now - start
        done.wait()
        // Each step of zeros is 16 MiB: the lock waits for one, not for 4 GiB.
        #expect(lockTook < .seconds(1), "the lock took \(lockTook)")
        let error = #expect(throws: ProtectionError.self) { try outcome.result?.get() }
        #expect(error?.code == .protectedDataUnavailable)
        handle.close()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        let size = try fixture.store.attributes(of: fixture.name("growing"), in: fixture.namespace).size
        #expect(size % ProtectedFileHandle.zeroFillStep == 0 && size < 4 << 30, "the file kept \(size) bytes")
    }

    @Test("sync on a handle that created its file, in a nested directory too")
    func syncAfterCreate() throws {
        let fixture = try unlockedFixture()
        for name in ["synced", "nested/dir/synced"].map(fixture.name) {
            let handle = try fixture.store.open(name, in: fixture.namespace, mode: .createNew(.none))
            try handle.sync()  // the file and, the first time, its directory
            try handle.append([1, 2, 3])
            try handle.sync()
            handle.close()
            #expect(try fixture.store.read(name, in: fixture.namespace) == [1, 2, 3])
        }
    }

    @Test("unlocking again while unlocked keeps open handles working")
    func secondUnlockKeepsHandles() throws {
        let fixture = try unlockedFixture()
        let handle = try fixture.store.open(fixture.name("a"), in: fixture.namespace, mode: .createNew(.complete))
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        try handle.append([1, 2, 3])
        #expect(try handle.read(offset: 0, count: 3) == [1, 2, 3])
    }

    @Test("offsets and sizes that would overflow are refused, not trapped")
    func hugeOffsets() throws {
        let fixture = try unlockedFixture()
        let handle = try fixture.store.open(fixture.name("big"), in: fixture.namespace, mode: .createNew(.none))
        try handle.append([1, 2, 3])
        #expect(try handle.read(offset: 1, count: Int.max) == [2, 3])
        #expect(try handle.read(offset: Int.max, count: Int.max) == [])
        for (offset, count) in [(Int.max, 1), (-1, 1), (1 << 48, 1)] {
            let error = #expect(throws: ProtectionError.self) { try handle.write([UInt8](repeating: 0, count: count), at: offset) }
            #expect(error?.code == .invalidArgument)
        }
        #expect((#expect(throws: ProtectionError.self) { try handle.truncate(to: Int.max) })?.code == .invalidArgument)
        #expect((#expect(throws: ProtectionError.self) { try handle.read(offset: -1, count: 1) })?.code == .invalidArgument)
    }

    @Test("erase after N failures also invalidates handles and removes files")
    func eraseAfterFailuresFinishesTheJob() throws {
        let fixture = try StoreFixture(segmentSize: 1024, policy: try FailedAttemptPolicy(delaysInSeconds: [0], eraseAfter: 2))
        try fixture.setPasscodeAndRestart()
        try fixture.store.write([1], to: fixture.name("d"), in: fixture.namespace, protection: .none)
        let handle = try fixture.store.open(fixture.name("d"), in: fixture.namespace, mode: .existing)
        _ = try? fixture.store.unlock(passcode: StoreFixture.secret("wrong"))
        let error = #expect(throws: ProtectionError.self) { try fixture.store.unlock(passcode: StoreFixture.secret("wrong")) }
        #expect(error?.code == .erasedAfterFailedAttempts)
        #expect(!handle.isOpen)
        #expect(try fixture.store.list(in: fixture.namespace).isEmpty)
        #expect(fixture.store.status.state == .unlocked)
        #expect(!fixture.store.status.passcodeSet)
    }

    @Test("a device secret readable by others is refused")
    func deviceSecretPermissions() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("device-key")
        _ = try DeviceSecret.load(from: .file(path: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        #expect((#expect(throws: ProtectionError.self) { try DeviceSecret.load(from: .file(path: path)) })?.code == .keyBagCorrupt)
    }
}
