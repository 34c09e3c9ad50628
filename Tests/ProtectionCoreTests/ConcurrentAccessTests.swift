import Foundation
import ProtectionCore
import ProtectionTestSupport
import Synchronization
import Testing

@Suite("One-off calls by name while a handle writes")
struct ConcurrentAccessTests {
    private func unlockedFixture() throws -> StoreFixture {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        return fixture
    }

    /// A new file "growing" of 100 bytes of 7s in class `protection`, and a handle on it.
    private func openGrowing(_ fixture: StoreFixture, _ protection: ProtectionClass = .none) throws
        -> (name: FileName, handle: ProtectedFileHandle) {
        let name = fixture.name("growing")
        let handle = try fixture.store.open(name, in: fixture.namespace, mode: .createNew(protection))
        try handle.append([UInt8](repeating: 7, count: 100))
        return (name, handle)
    }

    /// Reads the first 16 bytes of `name` by name; fails unless they are 7s.
    private static func readFirstBytes(_ store: ProtectedStore, _ name: FileName, _ namespace: Namespace) throws {
        let bytes = try store.read(name, in: namespace, offset: 0, count: 16)
        guard bytes == [UInt8](repeating: 7, count: 16) else { throw ProtectionError(.integrityFailure, "wrong bytes") }
    }

    /// Runs `iterations` of `probe` while another thread keeps growing and
    /// cutting the file through `handle`; returns the probe's failures.
    private func whileGrowing(
        _ handle: ProtectedFileHandle, iterations: Int, piece pieceSize: Int = 300,
        _ probe: @escaping @Sendable () throws -> Void
    ) throws -> [String] {
        let piece = [UInt8](repeating: 7, count: pieceSize)
        return try whileWriting(iterations: iterations, probe) {
            // Every append past a segment boundary makes the old last
            // segment non-final before writing the new final one.
            if try handle.append(piece) > 24 * 1024 { try handle.truncate(to: 100) }
        }
    }

    /// Runs `iterations` of `probe` while another thread runs `write` over
    /// and over; returns the probe's failures.
    private func whileWriting(
        iterations: Int, _ probe: @escaping @Sendable () throws -> Void,
        write: @escaping @Sendable () throws -> Void
    ) throws -> [String] {
        let stop = Atomic(false)
        let writerFailure = Mutex<String?>(nil)
        let writerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { writerDone.signal() }
            do {
                while !stop.load(ordering: .relaxed) { try write() }
            } catch {
                writerFailure.withLock { $0 = "\(error)" }
            }
        }
        var failures: [String] = []
        for _ in 0..<iterations {
            do { try probe() } catch { failures.append("\(error)") }
        }
        stop.store(true, ordering: .relaxed)
        writerDone.wait()
        #expect(writerFailure.withLock { $0 } == nil)
        return failures
    }

    @Test("a read by name never sees a handle's write half done")
    func readByNameDuringGrowth() throws {
        let fixture = try unlockedFixture()
        let (name, handle) = try openGrowing(fixture, .completeUntilFirstUserAuthentication)
        defer { handle.close() }
        let store = fixture.store, namespace = fixture.namespace
        let failures = try whileGrowing(handle, iterations: 400) {
            try Self.readFirstBytes(store, name, namespace)
        }
        #expect(failures.isEmpty, "\(failures.count) of 400 reads failed: \(failures.first ?? "")")
    }

    @Test("stat and list by name never see a handle's write half done")
    func attributesDuringGrowth() throws {
        let fixture = try unlockedFixture()
        let (name, handle) = try openGrowing(fixture)
        defer { handle.close() }
        let store = fixture.store, namespace = fixture.namespace
        // Pieces of several segments: a file length between two of them
        // is whole segments but not a size the handle ever reported.
        let failures = try whileGrowing(handle, iterations: 400, piece: 2500) {
            let attributes = try store.attributes(of: name, in: namespace)
            guard attributes.size % 2500 == 100 else {
                throw ProtectionError(.integrityFailure, "size \(attributes.size) is not one the handle ever had")
            }
            guard try store.list(in: namespace).map(\.name) == [name] else {
                throw ProtectionError(.integrityFailure, "list lost the file")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of 400 stats failed: \(failures.first ?? "")")
    }

    @Test("setProtection by name while a handle writes keeps one header")
    func setProtectionDuringGrowth() throws {
        let fixture = try unlockedFixture()
        let (name, handle) = try openGrowing(fixture)
        defer { handle.close() }
        let store = fixture.store, namespace = fixture.namespace
        let classes: [ProtectionClass] = [.none, .completeUntilFirstUserAuthentication]
        let turn = Atomic(0)
        let failures = try whileGrowing(handle, iterations: 200) {
            let next = classes[turn.add(1, ordering: .relaxed).newValue % 2]
            try store.setProtection(next, of: name, in: namespace)
            guard handle.protection == next else { throw ProtectionError(.integrityFailure, "handle sees another class") }
        }
        #expect(failures.isEmpty, "\(failures.count) of 200 changes failed: \(failures.first ?? "")")
    }

    @Test("a handle opened while another handle writes joins it cleanly")
    func openDuringGrowth() throws {
        let fixture = try unlockedFixture()
        let (name, handle) = try openGrowing(fixture)
        defer { handle.close() }
        let store = fixture.store, namespace = fixture.namespace
        let failures = try whileGrowing(handle, iterations: 300) {
            let second = try store.open(name, in: namespace, mode: .existing)
            defer { second.close() }
            _ = try second.read(offset: 0, count: 16)
        }
        #expect(failures.isEmpty, "\(failures.count) of 300 opens failed: \(failures.first ?? "")")
    }

    @Test("a read by name while handles open, write and close the file")
    func readByNameWhileHandlesComeAndGo() throws {
        let fixture = try unlockedFixture()
        let name = fixture.name("growing")
        try fixture.store.write([UInt8](repeating: 7, count: 100), to: name, in: fixture.namespace, durable: false)
        let store = fixture.store, namespace = fixture.namespace
        let piece = [UInt8](repeating: 7, count: 2500)
        let failures = try whileWriting(iterations: 400, {
            try Self.readFirstBytes(store, name, namespace)
        }, write: {
            let handle = try store.open(name, in: namespace, mode: .existing)
            defer { handle.close() }
            if try handle.append(piece) > 24 * 1024 { try handle.truncate(to: 100) }
        })
        #expect(failures.isEmpty, "\(failures.count) of 400 reads failed: \(failures.first ?? "")")
        #expect(store.openHandleCount == 0)
    }

    @Test("a lock wipes a class A file's key while the file's fsync is still running")
    func lockDoesNotWaitForFsync() throws {
        let fixture = try unlockedFixture()
        let handle = try fixture.store.open(fixture.name("synced"), in: fixture.namespace, mode: .createNew(.complete))
        defer { handle.close() }
        try handle.append([1, 2, 3])
        let inFlush = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let directory = fixture.directory.path
        FileFlush.setHookForTesting { path in
            guard path.hasPrefix(directory) else { return }
            inFlush.signal()
            release.wait()
        }
        defer { FileFlush.setHookForTesting(nil) }
        let syncDone = DispatchSemaphore(value: 0)
        let syncFailure = Mutex<String?>(nil)
        Thread.detachNewThread {
            defer { syncDone.signal() }
            do { try handle.sync() } catch { syncFailure.withLock { $0 = "\(error)" } }
        }
        guard inFlush.wait(timeout: .now() + 30) == .success else {
            release.signal()
            Issue.record("the sync never reached its fsync")
            return
        }
        let store = fixture.store
        let locked = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? store.requestLock(grace: .zero)
            locked.signal()
        }
        // Held in its fsync, the sync must not hold up the lock.
        let lockedDuringFsync = locked.wait(timeout: .now() + 10) == .success
        release.signal()
        syncDone.wait()
        if !lockedDuringFsync { locked.wait() }
        #expect(lockedDuringFsync, "the lock waited for the fsync")
        #expect(syncFailure.withLock { $0 } == nil, "the sync failed: \(syncFailure.withLock { $0 } ?? "")")
        #expect(throws: ProtectionError.self) { try handle.size() }
        #expect(fixture.store.lockState == .locked)
    }
}
