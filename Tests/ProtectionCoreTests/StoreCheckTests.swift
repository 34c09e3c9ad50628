import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Testing

/// `ProtectedStore.check()`, the fsck behind `protctl check`: a clean store
/// reports nothing, each kind of damage is reported where it is, and the
/// check changes nothing on disk.
@Suite("Store check")
struct StoreCheckTests {
    private static let other = Namespace(uid: 4242)
    private static let longName = String(repeating: "L", count: 200)
    private static let otherLongName = String(repeating: "M", count: 200)

    /// A store with a file in every class, nested names, two long (200-byte)
    /// components, one of them a directory, and a second namespace.
    private func populatedStore() throws -> StoreFixture {
        let fixture = try StoreFixture()
        try fixture.writeEveryClass()
        for (name, namespace) in [("dir/inner", fixture.namespace), ("dir/sub/deeper", fixture.namespace),
                                  (Self.longName, fixture.namespace), (Self.otherLongName + "/leaf", fixture.namespace),
                                  ("theirs", Self.other)] {
            try fixture.store.write(Array(name.utf8), to: fixture.name(name), in: namespace, protection: .none)
        }
        return fixture
    }

    /// Every entry under the state directory with its type, mode, size and
    /// modification time, links not followed.
    private func snapshot(_ fixture: StoreFixture) throws -> [String: String] {
        var entries: [String: String] = [:]
        func walk(_ directory: String) throws {
            for entry in try FileManager.default.contentsOfDirectory(atPath: directory) {
                let path = directory + "/" + entry
                var info = stat()
                guard lstat(path, &info) == 0 else { continue }
                entries[path] = "\(info.st_mode) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
                if (info.st_mode & S_IFMT) == S_IFDIR { try walk(path) }
            }
        }
        try walk(fixture.directory.path)
        return entries
    }

    /// The check's report, after making sure it changed nothing on disk.
    private func check(_ fixture: StoreFixture) throws -> StoreCheckReport {
        let before = try snapshot(fixture)
        let report = try fixture.store.check()
        #expect(try snapshot(fixture) == before, "the check changed the state directory")
        return report
    }

    private func lastComponent(_ path: String) -> String { URL(fileURLWithPath: path).lastPathComponent }
    private func parent(_ path: String) -> String { URL(fileURLWithPath: path).deletingLastPathComponent().path }

    private func relative(_ fixture: StoreFixture, _ path: String) -> String {
        String(path.dropFirst(fixture.directory.path.count + 1))
    }

    @Test("a clean store with every class, nested names and long components reports no problem")
    func cleanStore() throws {
        let fixture = try populatedStore()
        let report = try check(fixture)
        #expect(report.problems == [])
        #expect(report.isClean)
        #expect(report.namespaces == 2)
        #expect(report.files == 9)
        #expect(report.verifiedFiles == 9)
        #expect(report.unverifiableFiles == 0)
    }

    @Test("locked, and before the first unlock, files whose class key is gone are not verifiable, and no problem")
    func lockedStore() throws {
        let fixture = try populatedStore()
        try fixture.setPasscodeAndRestart()
        var report = try check(fixture)
        #expect(report.isClean, "\(report.problems)")
        #expect(report.files == 9)
        #expect(report.unverifiableFiles == 3, "classes A, B and C before the first unlock")
        #expect(report.verifiedFiles == 6)

        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        _ = try fixture.store.requestLock(grace: .zero)
        #expect(fixture.store.lockState == .locked)
        report = try check(fixture)
        #expect(report.isClean, "\(report.problems)")
        #expect(report.unverifiableFiles == 2, "classes A and B while locked")
        #expect(report.verifiedFiles == 7)
    }

    @Test("a file a handle has open is checked between the handle's writes")
    func fileOpenThroughAHandle() throws {
        let fixture = try populatedStore()
        let handle = try fixture.store.open(fixture.name("dir/inner"), in: fixture.namespace, mode: .existing)
        defer { handle.close() }
        _ = try handle.append([UInt8](repeating: 7, count: 100_000))
        let report = try check(fixture)
        #expect(report.isClean, "\(report.problems)")
        #expect(report.verifiedFiles == 9)
        _ = try handle.append([1])
    }

    /// Damage done on disk, and what the check must say about it.
    enum Tamper: String, CaseIterable, CustomTestStringConvertible {
        case copiedToAnotherNamespace, movedIntoSubdirectory, sidecarRemoved, orphanSidecar, sidecarOfAnotherEntry
        case flippedKeySlotByte, truncated, plantedSymlink, legacyDirectory

        var testDescription: String { rawValue }
    }

    /// What a problem must say: where it is, and words of its description.
    private struct Expected {
        var uid: UInt32?
        var name: String?
        var path: String
        var words: String
    }

    /// Does `tamper` to `fixture`'s disk; returns the problem it should cause.
    private func apply(_ tamper: Tamper, to fixture: StoreFixture) throws -> Expected {
        let files = FileManager.default
        let mine = fixture.namespace.uid
        switch tamper {
        case .copiedToAnotherNamespace:
            let source = try fixture.diskPath("none")
            let copy = try fixture.filesDirectory(uid: Self.other.uid) + "/" + lastComponent(source)
            try files.copyItem(atPath: source, toPath: copy)
            return Expected(uid: Self.other.uid, path: relative(fixture, copy), words: "does not open here")
        case .movedIntoSubdirectory:
            let source = try fixture.diskPath("none")
            let moved = parent(try fixture.diskPath("dir/inner")) + "/" + lastComponent(source)
            try files.moveItem(atPath: source, toPath: moved)
            return Expected(uid: mine, path: relative(fixture, moved), words: "moved or copied")
        case .sidecarRemoved:
            let entry = try fixture.diskPath(Self.longName)
            try files.removeItem(atPath: entry + ".n")
            return Expected(uid: mine, path: relative(fixture, entry), words: "sidecar")
        case .orphanSidecar:
            let entry = try fixture.diskPath(Self.longName)
            try files.removeItem(atPath: entry)
            return Expected(uid: mine, path: relative(fixture, entry + ".n"), words: "sidecar without its entry")
        case .sidecarOfAnotherEntry:
            let entry = try fixture.diskPath(Self.longName)
            let other = parent(try fixture.diskPath(Self.otherLongName + "/leaf"))
            try files.removeItem(atPath: entry + ".n")
            try files.copyItem(atPath: other + ".n", toPath: entry + ".n")
            return Expected(uid: mine, path: relative(fixture, entry), words: "holds another entry's name")
        case .flippedKeySlotByte:
            let path = try fixture.diskPath("completeUntilFirstUserAuthentication")
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            bytes[40] ^= 0x01  // inside the wrapped key (slot: bytes 28..<108)
            try bytes.write(to: URL(fileURLWithPath: path))
            return Expected(uid: mine, name: "completeUntilFirstUserAuthentication", path: relative(fixture, path),
                            words: "key slot or header tag")
        case .truncated:
            let path = try fixture.diskPath("dir/inner")
            #expect(truncate(path, 141) == 0)
            return Expected(uid: mine, name: "dir/inner", path: relative(fixture, path), words: "not whole segments")
        case .plantedSymlink:
            let link = try fixture.filesDirectory() + "/planted"
            try files.createSymbolicLink(atPath: link, withDestinationPath: "/etc/passwd")
            return Expected(uid: mine, path: relative(fixture, link), words: "a symlink")
        case .legacyDirectory:
            let legacy = fixture.directory.path + "/store/1000"
            try files.createDirectory(atPath: legacy + "/files", withIntermediateDirectories: true)
            try Data([1]).write(to: URL(fileURLWithPath: legacy + "/files/left"))
            return Expected(uid: 1000, path: "store/1000", words: "first layout")
        }
    }

    @Test("damage on disk is reported once, where it is, and the check changes nothing", arguments: Tamper.allCases)
    func reportsDamage(tamper: Tamper) throws {
        let fixture = try populatedStore()
        let expected = try apply(tamper, to: fixture)
        let report = try check(fixture)
        #expect(report.problemCount == 1, "\(report.problems)")
        let problem = try #require(report.problems.first)
        #expect(problem.path == expected.path)
        #expect(problem.uid == expected.uid)
        #expect(problem.name == expected.name)
        #expect(problem.description.contains(expected.words), "\(problem.description)")
        #expect(!report.isClean)
    }
}
