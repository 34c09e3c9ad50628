import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Sodium
import Synchronization
import Testing

/// Issue 37 item 4: a store of the first layout (uids and names in clear
/// on disk) moves to sealed names at start, once, crash-safe.
@Suite("Moving the first store layout to sealed names")
struct LegacyLayoutMigrationTests {
    static let long = String(repeating: "legacy-long-", count: 17)  // 204 bytes
    static let files: [(uid: UInt32, name: String)] = [
        (1000, "plain.txt"), (1000, "docs/2026/report.pdf"), (1000, "docs/notes"), (1000, "\(long)/inside"),
        (1000, "docs/\(long)"), (1001, "other-user"), (1001, "docs/notes"),
    ]

    /// A store holding `files` in every class (class A and C after the
    /// passcode's unlock), turned back into the first layout.
    private func legacyStore() throws -> StoreFixture {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.setPasscode(StoreFixture.secret("correct horse"), old: nil)
        for (index, file) in Self.files.enumerated() {
            try fixture.store.write(content(file), to: fixture.name(file.name), in: Namespace(uid: file.uid),
                                    protection: ProtectionClass.allCases[index % 4])
        }
        fixture.store.shutdown()
        try LegacyStoreLayout.convert(stateDirectory: fixture.directory.path, files: Self.files)
        return fixture
    }

    private func content(_ file: (uid: UInt32, name: String)) -> [UInt8] { Array("\(file.uid) \(file.name)".utf8) }

    /// Whether every file lists and reads back as written.
    private func everyFileReads(_ store: ProtectedStore) throws -> Bool {
        for uid in Set(Self.files.map(\.uid)) {
            let expected = Self.files.filter { $0.uid == uid }.map(\.name).sorted()
            guard try store.list(in: Namespace(uid: uid)).map(\.name.value) == expected else { return false }
        }
        return try Self.files.allSatisfy { try store.read(FileName($0.name), in: Namespace(uid: $0.uid)) == content($0) }
    }

    private func keyBagRecordsSealedNames(_ fixture: StoreFixture) throws -> Bool {
        let keyBag = try KeyBag(path: fixture.directory.path + "/keybag", deviceSecret: fixture.deviceSecret(), cost: .minimum)
        defer { keyBag.wipe() }
        return keyBag.namesSealed
    }

    private func storeEntries(_ fixture: StoreFixture) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path + "/store").sorted()
    }

    @Test("every file moves at start, with one notice counting them, and reads back; the next start moves nothing")
    func movesOnce() throws {
        let fixture = try legacyStore()
        #expect(try storeEntries(fixture) == ["1000", "1001"])
        #expect(try !keyBagRecordsSealedNames(fixture))
        let notices = Mutex<[StoreNotice]>([])
        try fixture.restart { notice in notices.withLock { $0.append(notice) } }
        #expect(notices.withLock { $0.filter { if case .namesSealed = $0 { true } else { false } } }
                == [.namesSealed(moved: Self.files.count, leftBehind: 0, in: [])])
        #expect(try storeEntries(fixture).allSatisfy { UInt32($0) == nil }, "no directory is named by a uid")
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        #expect(try everyFileReads(fixture.store))
        #expect(try keyBagRecordsSealedNames(fixture), "a protd without sealed names now refuses the key bag")

        notices.withLock { $0.removeAll() }
        try fixture.restart { notice in notices.withLock { $0.append(notice) } }
        #expect(notices.withLock { $0 }.isEmpty)
    }

    @Test("what cannot move stays where it is, with a warning, and everything else moves")
    func leftBehind() throws {
        let fixture = try legacyStore()
        let legacy = fixture.directory.path + "/store/1000/files"
        try FileManager.default.createSymbolicLink(atPath: legacy + "/link", withDestinationPath: "/etc/passwd")
        let notices = Mutex<[StoreNotice]>([])
        try fixture.restart { notice in notices.withLock { $0.append(notice) } }
        let warning = StoreNotice.namesSealed(moved: Self.files.count, leftBehind: 1, in: [legacy])
        #expect(notices.withLock { $0.contains(warning) })
        #expect(warning.isWarning)
        #expect(FileManager.default.fileExists(atPath: fixture.directory.path + "/store/1000/files"))
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.path + "/store/1001"))
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        #expect(try everyFileReads(fixture.store))
    }

    /// Runs protd-crash-probe's `open` with crash points 1, 2, ... until
    /// the start completes: after every crash each file is under its old
    /// path or its new one, and a start after the last crash finishes the
    /// job with every file reading back.
    @Test("a start killed before any of its disk I/O calls loses nothing, and the next start finishes the move")
    func crashAtEveryStep() throws {
        let probe = CommandRunner.builtProduct("protd-crash-probe")
        let template = try legacyStore()
        var crashes = 0
        for crashPoint in 1...400 {
            let directory = try TemporaryDirectory("migrate")
            defer { directory.remove() }
            try FileManager.default.removeItem(atPath: directory.path)
            try FileManager.default.copyItem(atPath: template.directory.path, toPath: directory.path)
            let result = try CommandRunner.run(probe, [directory.path, "\(crashPoint)", "open", "-"])
            #expect(result.status == 0 || result.status == 86, "probe: \(result.stderr)")
            // Nothing lost: each file is at its legacy path or its sealed one.
            let layout = try StoreLayout(stateDirectory: directory.path,
                                         deviceSecret: DeviceSecret.load(from: .file(path: directory.path + "/device-key")))
            for file in Self.files {
                let old = directory.path + "/store/\(file.uid)/files/" + file.name
                let new = try layout.path(of: file.name, uid: file.uid)
                #expect(FileManager.default.fileExists(atPath: old) != FileManager.default.fileExists(atPath: new),
                        "crash point \(crashPoint): \(file.name) of \(file.uid) is in exactly one place")
            }
            let store = try ProtectedStore(configuration: StoreConfiguration(stateDirectory: directory.path,
                                                                            passcodeCost: .minimum))
            defer { store.shutdown() }
            _ = try store.unlock(passcode: StoreFixture.secret("correct horse"))
            #expect(try everyFileReads(store), "crash point \(crashPoint)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/store").allSatisfy { UInt32($0) == nil })
            if result.status == 0 { break }
            crashes += 1
        }
        #expect(crashes >= Self.files.count, "the start was interrupted at each of its I/O calls (\(crashes))")
    }
}
