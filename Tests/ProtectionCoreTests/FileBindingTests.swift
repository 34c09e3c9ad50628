import Foundation
@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// Finding F5: a file's header is bound to its namespace and name, so a
/// file copied, moved or linked on disk fails integrity; files of an older
/// protd are bound in place.
@Suite("Files are bound to their namespace and name")
struct FileBindingTests {
    private let other = Namespace(uid: 4242)

    private func path(_ fixture: StoreFixture, _ namespace: Namespace, _ name: String) throws -> String {
        try fixture.diskPath(name, uid: namespace.uid)
    }


    private func integrityFailure(_ fixture: StoreFixture, _ name: String, in namespace: Namespace) -> Bool {
        do {
            _ = try fixture.store.read(fixture.name(name), in: namespace)
            return false
        } catch let error as ProtectionError {
            return error.code == .integrityFailure
        } catch {
            return false
        }
    }

    @Test("a file copied or hard-linked into another uid's namespace, or renamed on disk, fails integrity", arguments: ProtectionClass.allCases)
    func movedOnDisk(protection: ProtectionClass) throws {
        let fixture = try StoreFixture()
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        try fixture.writeEveryClass()
        // The other namespace exists once its owner used it.
        try fixture.store.write([1], to: fixture.name("mine"), in: other, protection: .none)
        let source = try path(fixture, fixture.namespace, "\(protection)")

        try FileManager.default.copyItem(atPath: source, toPath: try path(fixture, other, "stolen"))
        #expect(integrityFailure(fixture, "stolen", in: other), "copied to uid 4242")
        try FileManager.default.linkItem(atPath: source, toPath: try path(fixture, other, "linked"))
        #expect(integrityFailure(fixture, "linked", in: other), "linked into uid 4242")
        try FileManager.default.moveItem(atPath: source, toPath: try path(fixture, fixture.namespace, "renamed"))
        #expect(integrityFailure(fixture, "renamed", in: fixture.namespace), "renamed on disk")
        // Where it belongs, it reads again.
        try FileManager.default.moveItem(atPath: try path(fixture, fixture.namespace, "renamed"), toPath: source)
        #expect(try fixture.store.read(fixture.name("\(protection)"), in: fixture.namespace) == Array("\(protection)".utf8))
    }

    /// Rewrites every file of the fixture's namespace with a version 1
    /// header (as protd wrote before binding) and clears the key bag's
    /// "files bound" flag, as a state directory of that protd has it.
    private func makeVersionOne(_ fixture: StoreFixture, passcode: String? = nil) throws {
        fixture.store.shutdown()
        let secret = try fixture.deviceSecret()
        let keyBagPath = fixture.directory.path + "/keybag"
        let bag = try KeyBag(path: keyBagPath, deviceSecret: secret, cost: .minimum)
        defer { bag.wipe() }
        if let passcode { try bag.unlock(passcode: StoreFixture.secret(passcode)) }
        for protection in ProtectionClass.allCases {
            let name = fixture.name("\(protection)")
            let file = try path(fixture, fixture.namespace, name.value)
            let fd = open(file, O_RDWR)
            defer { close(fd) }
            let binding = FileBinding(name, in: fixture.namespace)
            let header = try EncryptedFile.readHeader(fd: fd, path: file, binding: binding)
            let key = try FileKey.unwrap(header, keys: bag.keys)
            defer { key.wipe() }
            let old = try key.makeHeader(protection: protection, segmentSize: header.segmentSize, fileID: header.fileID,
                                         binding: binding, keys: bag.keys, version: 1)
            try old.encoded.withUnsafeBytes { try Posix.pwrite(fd, $0, at: 0, path: file) }
        }
        let macKey = try KeyedBlake2b.deriveKey(key: secret, parts: [Array("protd.keybag.record-mac.v1".utf8)])
        var record = try KeyBagRecord.decode(try Posix.readFile(keyBagPath), macKey: macKey)
        record.filesBound = false
        try Data(try record.encode(macKey: macKey)).write(to: URL(fileURLWithPath: keyBagPath))
    }

    private func headerVersions(_ fixture: StoreFixture) throws -> [UInt8] {
        try ProtectionClass.allCases.map {
            try Data(contentsOf: URL(fileURLWithPath: try path(fixture, fixture.namespace, "\($0)")))[4]
        }
    }

    @Test("without a passcode, files of an older protd are bound at start; a version 1 copy is refused after")
    func upgradeAtStart() throws {
        let fixture = try StoreFixture()
        try fixture.writeEveryClass()
        try makeVersionOne(fixture)
        #expect(try headerVersions(fixture) == [1, 1, 1, 1])
        let unbound = try Data(contentsOf: URL(fileURLWithPath: try path(fixture, fixture.namespace, "none")))

        try fixture.restart()
        #expect(try headerVersions(fixture) == [2, 2, 2, 2])
        for protection in ProtectionClass.allCases {
            #expect(try fixture.store.read(fixture.name("\(protection)"), in: fixture.namespace) == Array("\(protection)".utf8))
        }
        // An unbound copy put back (or planted elsewhere) no longer reads.
        try unbound.write(to: URL(fileURLWithPath: try path(fixture, fixture.namespace, "none")))
        #expect(integrityFailure(fixture, "none", in: fixture.namespace))
        try fixture.restart()
        #expect(integrityFailure(fixture, "none", in: fixture.namespace), "the flag is kept in the key bag")
    }

    @Test("with a passcode, class D files are bound at start and the others at the first unlock")
    func upgradeAtUnlock() throws {
        let fixture = try StoreFixture()
        try fixture.store.setPasscode(StoreFixture.secret("correct horse"), old: nil)
        try fixture.writeEveryClass()
        try makeVersionOne(fixture, passcode: "correct horse")
        try fixture.restart()
        // Order: complete, completeUnlessOpen, completeUntilFirstUserAuthentication, none.
        #expect(try headerVersions(fixture) == [1, 1, 1, 2])
        #expect(try fixture.store.read(fixture.name("none"), in: fixture.namespace) == Array("none".utf8))
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        #expect(try headerVersions(fixture) == [2, 2, 2, 2])
        for protection in ProtectionClass.allCases {
            #expect(try fixture.store.read(fixture.name("\(protection)"), in: fixture.namespace) == Array("\(protection)".utf8))
        }
    }
}
