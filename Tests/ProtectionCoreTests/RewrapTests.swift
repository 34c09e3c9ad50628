import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

@Suite("Class changes and passcode changes rewrap keys only")
struct RewrapTests {
    private func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

    @Test("changing a file's class leaves every content segment byte-for-byte identical",
          arguments: ProtectionClass.allCases, ProtectionClass.allCases)
    func classChangeKeepsSegments(from: ProtectionClass, to: ProtectionClass) throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        let name = fixture.name("doc")
        let content = (0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try fixture.store.write(content, to: name, in: fixture.namespace, protection: from)
        let path = try fixture.diskPath("doc")
        let before = try bytes(path)
        try fixture.store.setProtection(to, of: name, in: fixture.namespace)
        let after = try bytes(path)
        #expect(after.count == before.count)
        #expect(after[140...] == before[140...], "content segments changed")
        #expect(after[12..<28] == before[12..<28], "file id changed")
        #expect(after[28..<140] != before[28..<140], "wrapped key and tag must change")
        #expect(try fixture.store.protection(of: name, in: fixture.namespace) == to)
        #expect(try fixture.store.read(name, in: fixture.namespace) == content)
    }

    @Test("a class change needs the old class's key to unwrap; moving into class B needs only its public key")
    func classChangeRespectsKeys() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        try fixture.store.write([1], to: fixture.name("a"), in: fixture.namespace, protection: .complete)
        try fixture.store.write([2], to: fixture.name("c"), in: fixture.namespace, protection: .completeUntilFirstUserAuthentication)
        _ = try fixture.store.requestLock(grace: .zero)
        let error = #expect(throws: ProtectionError.self) {
            try fixture.store.setProtection(.none, of: fixture.name("a"), in: fixture.namespace)
        }
        #expect(error?.code == .protectedDataUnavailable)
        let intoA = #expect(throws: ProtectionError.self) {
            try fixture.store.setProtection(.complete, of: fixture.name("c"), in: fixture.namespace)
        }
        #expect(intoA?.code == .protectedDataUnavailable)
        try fixture.store.setProtection(.completeUnlessOpen, of: fixture.name("c"), in: fixture.namespace)
        #expect(try fixture.store.protection(of: fixture.name("c"), in: fixture.namespace) == .completeUnlessOpen)
    }

    @Test("changing the passcode rewrites only the key bag: 1,000 stored files stay byte-identical")
    func passcodeChangeTouchesOnlyKeyBag() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart("old passcode")
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("old passcode"))
        for index in 0..<1000 {
            try fixture.store.write(Array("file \(index)".utf8), to: fixture.name("many/\(index)"), in: fixture.namespace,
                                    protection: ProtectionClass.allCases[index % 4], durable: false)
        }
        let filesRoot = try fixture.diskPath("many")
        func snapshot() throws -> [String: (Data, Date)] {
            var result: [String: (Data, Date)] = [:]
            for entry in try FileManager.default.contentsOfDirectory(atPath: filesRoot) {
                let path = filesRoot + "/" + entry
                let modified = try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as! Date
                result[entry] = (try Data(contentsOf: URL(fileURLWithPath: path)), modified)
            }
            return result
        }
        let before = try snapshot()
        let keyBagBefore = try bytes(fixture.directory.appending("keybag"))
        try fixture.store.setPasscode(StoreFixture.secret("new passcode"), old: StoreFixture.secret("old passcode"))
        let after = try snapshot()
        #expect(before.count == 1000)
        #expect(after.count == 1000)
        for (name, (data, modified)) in before {
            #expect(after[name]?.0 == data, "\(name) content changed")
            #expect(after[name]?.1 == modified, "\(name) was rewritten")
        }
        #expect(try bytes(fixture.directory.appending("keybag")) != keyBagBefore)
        try fixture.restart()
        #expect((#expect(throws: ProtectionError.self) {
            _ = try fixture.store.unlock(passcode: StoreFixture.secret("old passcode"))
        })?.code == .wrongPasscode)
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("new passcode"))
        #expect(try fixture.store.read(fixture.name("many/999"), in: fixture.namespace) == Array("file 999".utf8))
    }

    @Test("erase makes every file unreadable and removes it, and leaves no passcode")
    func eraseShredsEverything() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        try fixture.store.write([1, 2, 3], to: fixture.name("gone"), in: fixture.namespace, protection: .none)
        let handle = try fixture.store.open(fixture.name("gone"), in: fixture.namespace, mode: .existing)
        let saved = try Data(contentsOf: URL(fileURLWithPath: try fixture.diskPath("gone")))
        _ = try fixture.store.erase()
        #expect(!handle.isOpen)
        #expect(try fixture.store.list(in: fixture.namespace).isEmpty)
        #expect(!fixture.store.status.passcodeSet)
        // Even a copy of the old file, put where the new name keys look,
        // cannot be read under the new keys.
        let path = try fixture.diskPath("gone")
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try saved.write(to: URL(fileURLWithPath: path))
        #expect((#expect(throws: ProtectionError.self) {
            try fixture.store.read(fixture.name("gone"), in: fixture.namespace)
        })?.code == .integrityFailure)
    }
}
