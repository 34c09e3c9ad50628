import Foundation
@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// Finding F9 and the key bag's version 2: what someone holding the device
/// secret can rewrite is caught where protd can catch it, and version 1
/// key bags keep working and move to version 2.
@Suite("Key bag integrity beyond the device secret, and version 1 key bags")
struct KeyBagIntegrityTests {
    private let passcode = "integrity passcode"

    /// The key bag's keys as docs/FORMAT.md derives them from the device
    /// secret: what someone holding it computes.
    private struct DeviceDerived {
        let secret: SecretBytes
        let mac: SecretBytes
        let classD: SecretBytes
        let noPasscode: SecretBytes

        init(_ fixture: StoreFixture) throws {
            secret = try fixture.deviceSecret()
            mac = try KeyedBlake2b.deriveKey(key: secret, parts: [Array("protd.keybag.record-mac.v1".utf8)])
            classD = try KeyedBlake2b.deriveKey(key: secret, parts: [Array("protd.keybag.class-d.v1".utf8)])
            noPasscode = try KeyedBlake2b.deriveKey(key: secret, parts: [Array("protd.keybag.no-passcode.v1".utf8)])
        }

        func passcodeKey(_ passcode: String, _ record: KeyBagRecord) throws -> SecretBytes {
            let stretched = try Argon2id.deriveKey(passcode: StoreFixture.secret(passcode), salt: record.salt,
                                                   cost: record.cost)
            return try KeyedBlake2b.deriveKey(key: secret, label: Array("protd.keybag.passcode.v1".utf8), secret: stretched)
        }
    }

    private func keyBagPath(_ fixture: StoreFixture) -> String { fixture.directory.path + "/keybag" }

    private func readRecord(_ fixture: StoreFixture, _ keys: DeviceDerived) throws -> KeyBagRecord {
        try KeyBagRecord.decode(Array(Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture)))), macKey: keys.mac)
    }

    private func writeRecord(_ record: KeyBagRecord, _ fixture: StoreFixture, _ keys: DeviceDerived) throws {
        try Data(try record.encode(macKey: keys.mac)).write(to: URL(fileURLWithPath: keyBagPath(fixture)))
    }

    private func version(_ fixture: StoreFixture) throws -> UInt8 {
        try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture)))[4]
    }

    /// Rewrites the key bag as protd 1 wrote it: the same keys, wrapped
    /// with version 1's associated data (the whole header).
    private func downgrade(_ fixture: StoreFixture, passcode: String?) throws {
        let keys = try DeviceDerived(fixture)
        var record = try readRecord(fixture, keys)
        let wrapping = try passcode.map { try keys.passcodeKey($0, record) } ?? keys.noPasscode
        func open(_ wrapped: [UInt8], _ protection: ProtectionClass, _ key: SecretBytes) throws -> SecretBytes {
            try XChaCha20Poly1305.unwrap(wrapped, additionalData: record.associatedData(for: protection), key: key)
        }
        let a = try open(record.wrappedA, .complete, wrapping)
        let b = try open(record.wrappedBPrivate, .completeUnlessOpen, wrapping)
        let c = try open(record.wrappedC, .completeUntilFirstUserAuthentication, wrapping)
        let d = try open(record.wrappedD, .none, keys.classD)
        record.version = 1
        record.filesBound = false
        record.namesSealed = false
        func seal(_ key: SecretBytes, _ protection: ProtectionClass, _ under: SecretBytes) throws -> [UInt8] {
            try XChaCha20Poly1305.wrap(key, additionalData: record.associatedData(for: protection), key: under)
        }
        record.wrappedA = try seal(a, .complete, wrapping)
        record.wrappedBPrivate = try seal(b, .completeUnlessOpen, wrapping)
        record.wrappedC = try seal(c, .completeUntilFirstUserAuthentication, wrapping)
        record.wrappedD = try seal(d, .none, keys.classD)
        try writeRecord(record, fixture, keys)
    }



    @Test("a version 1 key bag without a passcode opens and is written as version 2 at start")
    func versionOneWithoutPasscode() throws {
        let fixture = try StoreFixture()
        try fixture.writeEveryClass()
        fixture.store.shutdown()
        try downgrade(fixture, passcode: nil)
        #expect(try version(fixture) == 1)
        try fixture.restart()
        #expect(try version(fixture) == 2)
        #expect(try fixture.readsEveryClass())
    }

    @Test("a version 1 key bag with a passcode counts attempts as version 1 and moves to version 2 at the first unlock")
    func versionOneWithPasscode() throws {
        let fixture = try StoreFixture()
        try fixture.store.setPasscode(StoreFixture.secret(passcode), old: nil)
        try fixture.writeEveryClass()
        fixture.store.shutdown()
        try downgrade(fixture, passcode: passcode)
        try fixture.restart()
        #expect(fixture.store.lockState == .beforeFirstUnlock)
        let wrong = #expect(throws: ProtectionError.self) { _ = try fixture.store.unlock(passcode: StoreFixture.secret("wrong")) }
        #expect(wrong?.code == .wrongPasscode)
        #expect(try version(fixture) == 1)
        #expect(fixture.store.status.failedAttempts == 1)
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode))
        #expect(try version(fixture) == 2)
        #expect(try fixture.readsEveryClass())
        let upgraded = try KeyBag(path: fixture.directory.path + "/keybag", deviceSecret: fixture.deviceSecret(), cost: .minimum)
        #expect(upgraded.namesSealed, "the first unlock also records the sealed names")
        upgraded.wipe()
        try fixture.restart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode))
        #expect(try fixture.readsEveryClass())
    }

    @Test("a class B public key replaced under a valid MAC is refused at unlock as keyBagCorrupt, a fault status reports, and the key bag is not written again")
    func replacedPublicKey() throws {
        let fixture = try StoreFixture()
        try fixture.store.setPasscode(StoreFixture.secret(passcode), old: nil)
        // A recovery key, so that removing it would rewrite the key bag.
        _ = try fixture.store.createRecoveryKey(passcode: StoreFixture.secret(passcode))
        try fixture.writeEveryClass()
        fixture.store.shutdown()
        let keys = try DeviceDerived(fixture)
        var record = try readRecord(fixture, keys)
        record.classBPublicKey = try X25519KeyPair.generate().publicKey
        try writeRecord(record, fixture, keys)

        try fixture.restart()
        let error = #expect(throws: ProtectionError.self) { _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode)) }
        #expect(error?.code == .keyBagCorrupt)
        #expect(error?.message.contains("public key") == true)
        #expect(fixture.store.lockState == .beforeFirstUnlock)
        #expect(fixture.store.status.fault?.contains("public key") == true)
        // No key is used any more, not even class D's, and unlocks stay refused.
        let read = #expect(throws: ProtectionError.self) { _ = try fixture.store.read(fixture.name("none"), in: fixture.namespace) }
        #expect(read?.code == .keyBagCorrupt)
        let again = #expect(throws: ProtectionError.self) { _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode)) }
        #expect(again?.code == .keyBagCorrupt)
        // Nor is the altered key bag written again.
        let keyBagBefore = try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture)))
        let removal = #expect(throws: ProtectionError.self) { try fixture.store.removeRecoveryKey() }
        #expect(removal?.code == .keyBagCorrupt)
        #expect(try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture))) == keyBagBefore)
    }

    @Test("a key bag rewritten on disk while protd runs (failed attempts reset) is refused at the next attempt")
    func attemptRecordRolledBack() throws {
        let fixture = try StoreFixture()
        try fixture.setPasscodeAndRestart(passcode)
        let before = try Data(contentsOf: URL(fileURLWithPath: keyBagPath(fixture)))
        for _ in 0..<2 {
            #expect(throws: ProtectionError.self) { _ = try fixture.store.unlock(passcode: StoreFixture.secret("guess")) }
        }
        #expect(fixture.store.status.failedAttempts == 2)
        try before.write(to: URL(fileURLWithPath: keyBagPath(fixture)))
        let error = #expect(throws: ProtectionError.self) { _ = try fixture.store.unlock(passcode: StoreFixture.secret(passcode)) }
        #expect(error?.code == .keyBagCorrupt)
        #expect(fixture.store.status.fault?.contains("rewritten while protd ran") == true)
        #expect(fixture.store.lockState == .beforeFirstUnlock)
    }

    @Test("a successful passcode change leaves the failed-attempt count at 0")
    func changeResetsCount() throws {
        let fixture = try StoreFixture()
        try fixture.setPasscodeAndRestart(passcode)
        for _ in 0..<3 { _ = try? fixture.store.unlock(passcode: StoreFixture.secret("wrong")) }
        #expect(fixture.store.status.failedAttempts == 3)
        try fixture.store.setPasscode(StoreFixture.secret("new"), old: StoreFixture.secret(passcode))
        #expect(fixture.store.status.failedAttempts == 0)
        try fixture.restart()
        #expect(fixture.store.status.failedAttempts == 0)
    }
}
