import Foundation
@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// Finding F1: a key bag saved before the first passcode (a backup, a
/// snapshot) plus the device secret must not open what is written after.
@Suite("The first passcode replaces the class keys and rewraps every file")
struct FirstPasscodeKeysTests {
    private let passcode = "first passcode"
    private let guarded: [ProtectionClass] = [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication]

    private func keyBagPath(_ fixture: StoreFixture) -> String { fixture.directory.path + "/keybag" }

    private func write(_ prefix: String, _ fixture: StoreFixture) throws {
        for protection in guarded {
            try fixture.store.write(Array("\(prefix) \(protection)".utf8), to: fixture.name("\(prefix)-\(protection)"),
                                    in: fixture.namespace, protection: protection)
        }
    }

    /// The class keys a saved key bag opens with the device secret alone
    /// (it has no passcode), loaded offline from a copy of it.
    private func offlineKeys(savedKeyBag: [UInt8], _ fixture: StoreFixture) throws -> ClassKeys {
        let offline = try TemporaryDirectory("offline")
        defer { offline.remove() }
        try Data(savedKeyBag).write(to: URL(fileURLWithPath: offline.path + "/keybag"))
        let bag = try KeyBag(path: offline.path + "/keybag",
                             deviceSecret: try fixture.deviceSecret(),
                             cost: .minimum)
        #expect(!bag.hasPasscode)
        return bag.keys
    }

    /// Whether `keys` unwrap the file key of `name` (read from disk).
    private func opens(_ name: String, with keys: ClassKeys, _ fixture: StoreFixture) throws -> Bool {
        let path = try fixture.diskPath(name)
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        let header = try EncryptedFile.readHeader(fd: fd, path: path, binding: FileBinding(fixture.name(name), in: fixture.namespace))
        return (try? FileKey.unwrap(header, keys: keys)) != nil
    }

    private var names: [String] { ["before", "after"].flatMap { prefix in guarded.map { "\(prefix)-\($0)" } } }

    @Test("a key bag saved before the first passcode opens no class A, B or C file, offline, with the device secret")
    func savedKeyBagOpensNothing() throws {
        let fixture = try StoreFixture()
        try write("before", fixture)
        let saved = try Array(Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))))
        // The saved key bag opens the files of its time: the check below can fail.
        let savedKeys = try offlineKeys(savedKeyBag: saved, fixture)
        for protection in guarded { #expect(try opens("before-\(protection)", with: savedKeys, fixture)) }

        try fixture.store.setPasscode(StoreFixture.secret(passcode), old: nil)
        try write("after", fixture)
        for name in names {
            #expect(try !opens(name, with: savedKeys, fixture), "\(name) opens with the key bag saved before the passcode")
        }
        // The rotation finished: the replaced keys are gone from the key bag too.
        #expect(try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))).count == KeyBagRecord.baseByteCount)
        try fixture.restart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode))
        for name in names {
            #expect(try fixture.store.read(fixture.name(name), in: fixture.namespace)
                == Array(name.replacingOccurrences(of: "-", with: " ").utf8))
        }
    }

    @Test("restored, a key bag saved before the first passcode starts unlocked but reads no class A, B or C file")
    func restoredKeyBagReadsNothing() throws {
        let fixture = try StoreFixture()
        try write("before", fixture)
        let saved = try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture)))
        try fixture.store.setPasscode(StoreFixture.secret(passcode), old: nil)
        try write("after", fixture)
        fixture.store.shutdown()
        try saved.write(to: URL(fileURLWithPath: keyBagPath(fixture)))
        try fixture.restart()
        #expect(fixture.store.lockState == .unlocked, "the saved key bag has no passcode")
        for name in names {
            let error = #expect(throws: ProtectionError.self) { _ = try fixture.store.read(fixture.name(name), in: fixture.namespace) }
            #expect(error?.code == .integrityFailure, "\(name)")
        }
    }

    @Test("a rotation a crash interrupted (key bag written, files not rewrapped) finishes at the next unlock")
    func interruptedRotationResumes() throws {
        let fixture = try StoreFixture()
        try write("before", fixture)
        let saved = try Array(Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))))
        fixture.store.shutdown()
        // What a crash right after the key bag write leaves: the new key bag, no file rewrapped.
        let bag = try KeyBag(path: keyBagPath(fixture),
                             deviceSecret: try fixture.deviceSecret(),
                             cost: .minimum)
        try bag.setPasscode(StoreFixture.secret(passcode), old: nil)
        #expect(bag.rotationPending)
        bag.wipe()

        try fixture.restart()
        #expect(fixture.store.lockState == .beforeFirstUnlock)
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode))
        for protection in guarded {
            #expect(try fixture.store.read(fixture.name("before-\(protection)"), in: fixture.namespace)
                == Array("before \(protection)".utf8))
            #expect(try !opens("before-\(protection)", with: try offlineKeys(savedKeyBag: saved, fixture), fixture))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))).count == KeyBagRecord.baseByteCount)
    }

    @Test("a handle open across the first passcode keeps working, and its file is rewrapped too")
    func openHandleAcrossRotation() throws {
        let fixture = try StoreFixture()
        let handle = try fixture.store.open(fixture.name("open"), in: fixture.namespace, mode: .createNew(.complete))
        try handle.write(Array("kept open".utf8), at: 0)
        let saved = try Array(Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))))
        try fixture.store.setPasscode(StoreFixture.secret(passcode), old: nil)
        try handle.write(Array("!".utf8), at: 9)
        #expect(try handle.read(offset: 0, count: 100) == Array("kept open!".utf8))
        handle.close()
        #expect(try !opens("open", with: try offlineKeys(savedKeyBag: saved, fixture), fixture))
        #expect(try fixture.store.read(fixture.name("open"), in: fixture.namespace) == Array("kept open!".utf8))
    }

    @Test("a whole-file write begun under the old keys and committed after keeps them until the next unlock rewraps it")
    func writeAcrossRotation() throws {
        let fixture = try StoreFixture()
        let saved = try Array(Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))))
        let pending = try fixture.store.beginWrite(to: fixture.name("slow"), in: fixture.namespace, protection: .complete)
        try pending.append(Array("slow write".utf8))
        try fixture.store.setPasscode(StoreFixture.secret(passcode), old: nil)
        try pending.commit()
        #expect(try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))).count == KeyBagRecord.withPreviousByteCount,
                "the previous keys stay while a write that took them runs")
        #expect(try fixture.store.read(fixture.name("slow"), in: fixture.namespace) == Array("slow write".utf8))

        try fixture.restart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode))
        #expect(try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))).count == KeyBagRecord.baseByteCount)
        #expect(try !opens("slow", with: try offlineKeys(savedKeyBag: saved, fixture), fixture))
        #expect(try fixture.store.read(fixture.name("slow"), in: fixture.namespace) == Array("slow write".utf8))
    }

    @Test("the first passcode killed before any of its disk I/O calls loses no file, and the next unlock finishes it")
    func crashAtEveryStep() throws {
        let probe = CommandRunner.builtProduct("protd-crash-probe")
        var crashes = 0
        for crashPoint in 1...300 {
            let fixture = try StoreFixture()
            try fixture.writeEveryClass()
            let saved = try Array(Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))))
            fixture.store.shutdown()
            let result = try CommandRunner.run(probe, [fixture.directory.path, "\(crashPoint)", "passwd", passcode])
            #expect(result.status == 0 || result.status == 86, "probe: \(result.stderr)")
            try fixture.restart()
            if fixture.store.lockState == .beforeFirstUnlock {
                _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode))
                #expect(try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))).count == KeyBagRecord.baseByteCount,
                        "crash point \(crashPoint): the unlock finished the rotation")
                for protection in guarded {
                    #expect(try !opens("\(protection)", with: try offlineKeys(savedKeyBag: saved, fixture), fixture),
                            "crash point \(crashPoint): \(protection) still opens with the old key bag")
                }
            } else {
                #expect(!fixture.store.status.passcodeSet, "crash point \(crashPoint): unlocked only without a passcode")
            }
            #expect(try fixture.readsEveryClass(), "crash point \(crashPoint): a file was lost")
            if result.status == 0 { break }
            crashes += 1
        }
        #expect(crashes >= 10, "the first passcode was interrupted at each of its I/O calls (\(crashes))")
    }

    @Test("a write that took the old keys and commits while the rewrap runs keeps the previous keys until the next unlock")
    func writeCommitsDuringRewrap() throws {
        let fixture = try StoreFixture()
        for index in 0..<2000 {
            try fixture.store.write([1], to: fixture.name("f\(index)"), in: fixture.namespace,
                                    protection: .completeUntilFirstUserAuthentication)
        }
        let pending = try fixture.store.beginWrite(to: fixture.name("late"), in: fixture.namespace,
                                                   protection: .completeUntilFirstUserAuthentication)
        try pending.append(Array("late content".utf8))
        let store = fixture.store
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? store.setPasscode(StoreFixture.secret("first passcode"), old: nil)
            done.signal()
        }
        // The key bag holds the previous keys: the rewrap is running.
        while (try? Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))).count) != KeyBagRecord.withPreviousByteCount {
            usleep(200)
        }
        try pending.commit()
        done.wait()
        #expect(try fixture.store.read(fixture.name("late"), in: fixture.namespace) == Array("late content".utf8))
        try fixture.restart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode))
        #expect(try fixture.store.read(fixture.name("late"), in: fixture.namespace) == Array("late content".utf8))
        #expect(try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))).count == KeyBagRecord.baseByteCount)
    }
}
