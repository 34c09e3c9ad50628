import Foundation
import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

@Suite("Storage quotas per namespace")
struct NamespaceQuotaTests {
    /// A store with `quota` in a fresh directory, and `body` run on it.
    private func withStore(_ quota: StorageQuota, _ body: (ProtectedStore) throws -> Void) throws {
        let directory = try TemporaryDirectory("quota")
        defer { directory.remove() }
        let store = try ProtectedStore(configuration: StoreConfiguration(stateDirectory: directory.path,
                                                                         passcodeCost: .minimum, quota: quota))
        defer { store.shutdown() }
        try body(store)
    }

    private func code(_ body: () throws -> Void) -> ProtectionError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? ProtectionError)?.code
        }
    }

    let alice = Namespace(uid: 1000), bob = Namespace(uid: 1001)
    let name = { (text: String) in try! FileName(text) }

    @Test("each namespace has its own quota; a refused write leaves the old content")
    func namespacesApart() throws {
        try withStore(StorageQuota(bytes: 1000)) { store in
            try store.write([UInt8](repeating: 1, count: 900), to: name("a"), in: alice, protection: .none)
            try store.write([UInt8](repeating: 2, count: 900), to: name("a"), in: bob, protection: .none)
            #expect(code { try store.write([UInt8](repeating: 3, count: 200), to: name("b"), in: alice) } == .quotaExceeded)
            #expect(code { try store.write([UInt8](repeating: 3, count: 1001), to: name("a"), in: alice) } == .quotaExceeded)
            #expect(try store.read(name("a"), in: alice) == [UInt8](repeating: 1, count: 900))
            #expect(try store.list(in: alice).map(\.name.value) == ["a"])
        }
    }

    @Test("delete and shrinking give room back; a handle's growth is charged, its overwrite is not")
    func deleteAndHandles() throws {
        try withStore(StorageQuota(bytes: 1000, files: 2)) { store in
            let handle = try store.open(name("h"), in: alice, mode: .createNew(.none))
            defer { handle.close() }
            try handle.append([UInt8](repeating: 1, count: 600))
            try store.write([UInt8](repeating: 2, count: 400), to: name("w"), in: alice, protection: .none)
            #expect(code { try handle.append([9]) } == .quotaExceeded)
            #expect(code { _ = try store.open(name("x"), in: alice, mode: .createNew(.none)) } == .quotaExceeded)
            try handle.write([7, 7], at: 0)
            #expect(code { try handle.write([7], at: Int.max) } == .invalidArgument)
            try handle.truncate(to: 500)
            try handle.append([UInt8](repeating: 3, count: 100))
            #expect(try handle.size() == 600)
            try store.delete(name("w"), in: alice)
            try store.write([UInt8](repeating: 4, count: 400), to: name("v"), in: alice, protection: .none)
        }
    }

    @Test("a whole-file write that replaces a file deleted or rewritten meanwhile is counted at what it replaced")
    func writeCountsWhatItReplaced() throws {
        try withStore(StorageQuota(bytes: 1000)) { store in
            try store.write([UInt8](repeating: 1, count: 600), to: name("x"), in: alice, protection: .none)
            // Deleted while a write of it runs: the write makes a new file of 600 bytes.
            let rewrite = try store.beginWrite(to: name("x"), in: alice, protection: .none)
            try rewrite.append([UInt8](repeating: 2, count: 600))
            try store.delete(name("x"), in: alice)
            try rewrite.commit()
            #expect(code { try store.write([UInt8](repeating: 3, count: 500), to: name("y"), in: alice) } == .quotaExceeded)
            // Rewritten smaller while a write of it runs: the write replaces 100 bytes, not 600.
            let again = try store.beginWrite(to: name("x"), in: alice, protection: .none)
            try again.append([UInt8](repeating: 4, count: 600))
            try store.write([UInt8](repeating: 5, count: 100), to: name("x"), in: alice, protection: .none)
            try again.commit()
            #expect(code { try store.write([UInt8](repeating: 3, count: 500), to: name("y"), in: alice) } == .quotaExceeded)
            try store.write([UInt8](repeating: 3, count: 400), to: name("y"), in: alice)
            // A write whose file shrank meanwhile, the room taken by another file: refused at commit,
            // the file as it is.
            try store.write([UInt8](repeating: 6, count: 300), to: name("x"), in: alice, protection: .none)
            let third = try store.beginWrite(to: name("x"), in: alice, protection: .none)
            try third.append([UInt8](repeating: 7, count: 550))
            try store.write([UInt8](repeating: 8, count: 100), to: name("x"), in: alice, protection: .none)
            try store.write([UInt8](repeating: 9, count: 200), to: name("z"), in: alice, protection: .none)
            #expect(code { _ = try third.commit() } == .quotaExceeded)
            #expect(try store.read(name("x"), in: alice) == [UInt8](repeating: 8, count: 100))
        }
    }

    @Test("a growth of many zero-fill steps past the quota is refused before the first step")
    func longGrowthRefusedWhole() throws {
        let step = ProtectedFileHandle.zeroFillStep
        try withStore(StorageQuota(bytes: 3 * step)) { store in
            let handle = try store.open(name("h"), in: alice, mode: .createNew(.none))
            defer { handle.close() }
            try handle.append([1])
            #expect(code { try handle.truncate(to: 4 * step) } == .quotaExceeded)
            #expect(code { try handle.write([2], at: 4 * step) } == .quotaExceeded)
            #expect(try handle.size() == 1)
            try handle.write([2], at: 3 * step - 1)
            #expect(try handle.size() == 3 * step)
            #expect(try handle.read(offset: 2 * step, count: 4) == [0, 0, 0, 0])
        }
    }

    @Test("a count that drifted (a handle writing to a deleted file) is corrected by listing before a refusal")
    func driftIsCorrected() throws {
        try withStore(StorageQuota(bytes: 1000)) { store in
            let orphan = try store.open(name("gone"), in: alice, mode: .createNew(.none))
            defer { orphan.close() }
            try orphan.append([UInt8](repeating: 1, count: 500))
            try store.delete(name("gone"), in: alice)
            try orphan.append([UInt8](repeating: 1, count: 400))
            try store.write([UInt8](repeating: 2, count: 1000), to: name("full"), in: alice, protection: .none)
        }
    }

    @Test("an erase empties the count")
    func eraseEmptiesTheCount() throws {
        try withStore(StorageQuota(files: 1)) { store in
            try store.write([1], to: name("one"), in: alice, protection: .none)
            #expect(code { try store.write([2], to: name("two"), in: alice, protection: .none) } == .quotaExceeded)
            _ = try store.erase()
            try store.write([2], to: name("two"), in: alice, protection: .none)
        }
    }
}

@Suite("Quotas and locks together")
struct QuotaLockRaceTests {
    /// A handle call that grows a file past the quota measures the
    /// namespace again inside the file's lock, and that measurement asks
    /// the store which files are open; a completing lock holds the store's
    /// lock while it invalidates class A files. Run both for 3 s: neither
    /// may wait for the other for good.
    @Test("a handle growing a class A file past the quota and locks completing at the same time never deadlock")
    func remeasureRacesLock() throws {
        let directory = try TemporaryDirectory("quota-lock")
        let store = try ProtectedStore(configuration: StoreConfiguration(
            stateDirectory: directory.path, passcodeCost: .minimum, quota: StorageQuota(bytes: 4096)))
        let passcode = "correct horse"
        try store.setPasscode(StoreFixture.secret(passcode), old: nil)
        let name = try FileName("grows"), namespace = Namespace(uid: 1000)
        try store.write([1], to: name, in: namespace, protection: .complete)
        let deadline = ContinuousClock.now + .seconds(3)
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            while ContinuousClock.now < deadline {
                guard let handle = try? store.open(name, in: namespace, mode: .existing) else { continue }
                // Each append passes the quota: refused after a new measurement.
                while (try? handle.append([UInt8](repeating: 2, count: 8192))) == nil, handle.isOpen,
                      ContinuousClock.now < deadline {}
                handle.close()
            }
        }
        DispatchQueue.global().async(group: done) {
            while ContinuousClock.now < deadline {
                _ = try? store.requestLock(grace: .zero)
                _ = try? store.unlock(passcode: StoreFixture.secret(passcode))
            }
        }
        let finished = done.wait(timeout: .now() + 30) == .success
        #expect(finished, "deadlocked: the handle and the lock wait for each other")
        if finished {
            store.shutdown()
            directory.remove()
        }
    }
}
