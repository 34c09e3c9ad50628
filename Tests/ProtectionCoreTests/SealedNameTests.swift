import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Testing

/// Issue 37: names, path components and uids never appear on disk in
/// clear, and a sealed entry moved, copied or swapped on disk never
/// stands for another file.
@Suite("Sealed names on disk")
struct SealedNameTests {
    /// A 198-byte component: past the 160 bytes a sealed entry name holds.
    static let long = String(repeating: "Long-Capybara-", count: 14) + "end~"
    /// The longest component a name may have.
    static let longest = "Wombat" + String(repeating: "w", count: 249)

    /// The code `body` fails with, or nil when it succeeds.
    private func failure(_ body: () throws -> Void) -> ProtectionError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? ProtectionError)?.code
        }
    }

    private func integrityFailure(_ body: () throws -> Void) -> Bool { failure(body) == .integrityFailure }
    private func notFound(_ body: () throws -> Void) -> Bool { failure(body) == .notFound }

    @Test("a missing file, or a path through a file, is reported by the name given, never by its sealed entry")
    func errorsSayTheName() throws {
        let fixture = try StoreFixture()
        let store = fixture.store, namespace = fixture.namespace
        try store.write(Array("a file".utf8), to: fixture.name("plain"), in: namespace, protection: .none)
        try store.write(Array("inside".utf8), to: fixture.name("folder/inner"), in: namespace, protection: .none)
        let attempts: [(String, ProtectionError.Code, (FileName) throws -> Void)] = [
            // One letter: it may well occur in the sealed entry's name, which must still not be shown.
            ("x", .notFound, { _ = try store.read($0, in: namespace) }),
            ("y", .notFound, { _ = try store.attributes(of: $0, in: namespace) }),
            ("folder", .notFound, { _ = try store.read($0, in: namespace) }),
            ("folder", .notFound, { _ = try store.open($0, in: namespace, mode: .existing) }),
            ("folder", .invalidName, { try store.write([1], to: $0, in: namespace, protection: .none) }),
            ("missing", .notFound, { _ = try store.attributes(of: $0, in: namespace) }),
            ("missing", .notFound, { try store.setProtection(.complete, of: $0, in: namespace) }),
            ("missing", .notFound, { _ = try store.read($0, in: namespace) }),
            ("missing", .notFound, { _ = try store.open($0, in: namespace, mode: .existing) }),
            ("missing", .notFound, { try store.delete($0, in: namespace) }),
            ("plain/inner", .invalidName, { _ = try store.read($0, in: namespace) }),
            ("plain/inner", .invalidName, { _ = try store.attributes(of: $0, in: namespace) }),
            ("plain/inner", .invalidName, { try store.write([1], to: $0, in: namespace, protection: .none) }),
        ]
        for (text, code, attempt) in attempts {
            let error = #expect(throws: ProtectionError.self) { try attempt(fixture.name(text)) }
            #expect(error?.code == code, "\(text): \(String(describing: error))")
            #expect(error?.message.hasPrefix("no file named \(text)") == true || error?.message.hasPrefix("\(text)") == true,
                    "\(text): \(String(describing: error))")
        }
    }

    @Test("after writes in every class and three namespaces, no name, path component or uid is in any path or byte of the state directory")
    func nothingInClear() throws {
        let fixture = try StoreFixture()
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        let uids: [UInt32] = [1000, 271_828, 1_591_398_413]
        let names = ["Quarterly-Payroll-Zebra.csv", "Medical/Records-Okapi/2026-Scan.pdf",
                     "\(Self.long)/Narwhal-inner", "Deep/\(Self.longest)"]
        for uid in uids {
            for (index, name) in names.enumerated() {
                try fixture.store.write(Array("content of \(name)".utf8), to: fixture.name(name), in: Namespace(uid: uid),
                                        protection: ProtectionClass.allCases[index % 4])
            }
        }
        _ = try fixture.store.requestLock(grace: .zero)

        var paths: [String] = []
        var bytes: [UInt8] = []
        let root = fixture.directory.path
        for relative in try FileManager.default.subpathsOfDirectory(atPath: root) {
            paths.append(relative)
            var info = stat()
            if lstat(root + "/" + relative, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
                bytes += Array(try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative)))
            }
        }
        #expect(paths.count > 20 && bytes.count > 1000)
        let components = Set(names.flatMap { $0.split(separator: "/").map(String.init) })
        for word in components.union(["Zebra", "Okapi", "Narwhal", "Capybara", "Wombat", "Medical", "Payroll"]) {
            #expect(!paths.contains { $0.contains(word) }, "\(word.prefix(20)) is in a path")
            #expect(!Self.contains(bytes, Array(word.utf8)), "\(word.prefix(20)) is in the bytes")
        }
        for uid in uids {
            #expect(!paths.contains { $0.split(separator: "/").contains(Substring(String(uid))) }, "uid \(uid) names a directory")
            #expect(!Self.contains(bytes, Array(String(uid).utf8)), "uid \(uid) is in the bytes as text")
            let binary = (0..<4).map { UInt8(truncatingIfNeeded: uid >> (8 * $0)) }
            #expect(!Self.contains(bytes, binary), "uid \(uid) is in the bytes")
        }
        // Every name is still there for its owner, in every lock state.
        for uid in uids {
            #expect(try fixture.store.list(in: Namespace(uid: uid)).map(\.name.value) == names.sorted())
        }
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, haystack.count >= needle.count else { return false }
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == first, haystack[index..<(index + needle.count)].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }

    @Test("list finds names by whole and partial prefixes, long components too; deleting a long name removes its sidecar")
    func listByPrefix() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let names = ["a/b/c", "a/bc", "a/b2", "ab", "\(Self.long)/x", "z/\(Self.longest)", "z/short"]
        for name in names { try fixture.store.write([1], to: fixture.name(name), in: fixture.namespace, protection: .none) }
        func list(_ prefix: String) throws -> [String] {
            try fixture.store.list(in: fixture.namespace, prefix: prefix).map(\.name.value)
        }
        #expect(try list("") == names.sorted())
        #expect(try list("a/") == ["a/b/c", "a/b2", "a/bc"])
        #expect(try list("a/b") == ["a/b/c", "a/b2", "a/bc"])
        #expect(try list("a/b/") == ["a/b/c"])
        #expect(try list("a") == ["a/b/c", "a/b2", "a/bc", "ab"])
        #expect(try list("Long-Capy") == ["\(Self.long)/x"])
        #expect(try list("z/Wombat") == ["z/\(Self.longest)"])
        #expect(try list("zz").isEmpty && list("nothing/").isEmpty && list("../").isEmpty)
        #expect(try fixture.store.attributes(of: fixture.name("z/\(Self.longest)"), in: fixture.namespace).size == 1)

        let directory = (try fixture.diskPath("z/short") as NSString).deletingLastPathComponent
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".n") }.count == 1)
        try fixture.store.delete(fixture.name("z/\(Self.longest)"), in: fixture.namespace)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".n") }.isEmpty)
        #expect(try list("z/") == ["z/short"])
    }

    @Test("a long name deleted while a whole-file write of it runs is listed again once the write commits")
    func deleteDuringWriteOfLongName() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let name = fixture.name("z/\(Self.longest)")
        try fixture.store.write([1], to: name, in: fixture.namespace, protection: .none)
        let write = try fixture.store.beginWrite(to: name, in: fixture.namespace, protection: .none)
        try write.append([2, 2])
        // The delete removes the entry and then its sidecar, which the write found there when it began.
        try fixture.store.delete(name, in: fixture.namespace)
        _ = try write.commit()
        #expect(try fixture.store.list(in: fixture.namespace).map(\.name) == [name])
        #expect(try fixture.store.read(name, in: fixture.namespace) == [2, 2])
        #expect(try fixture.store.check().problemCount == 0)
    }

    @Test("long directory components at every depth get their sidecars, and a write under one whose sidecar is gone writes it again")
    func sidecarsOfNestedDirectories() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let names = ["\(Self.long)/a/\(Self.longest)/b", "\(Self.long)/a/\(Self.longest)/c", "x/\(Self.long)/\(Self.long)/y"]
        for name in names { try fixture.store.write([7], to: fixture.name(name), in: fixture.namespace, protection: .none) }
        #expect(try fixture.store.check().isClean)
        #expect(try fixture.store.list(in: fixture.namespace, prefix: "").map(\.name.value) == names.sorted())

        // The sidecar of the third component of the first two names.
        let directory = try fixture.diskPath(names[0])
        let third = ((directory as NSString).deletingLastPathComponent as NSString)
        let sidecar = third.deletingLastPathComponent + "/" + third.lastPathComponent + ".n"
        #expect(FileManager.default.fileExists(atPath: sidecar))
        try FileManager.default.removeItem(atPath: sidecar)
        #expect(try !fixture.store.check().isClean)
        try fixture.store.write([8], to: fixture.name(names[1]), in: fixture.namespace, protection: .none)
        #expect(FileManager.default.fileExists(atPath: sidecar))
        #expect(try fixture.store.check().isClean)
        #expect(try fixture.store.read(fixture.name(names[0]), in: fixture.namespace) == [7])
    }

    @Test("an entry moved or copied to another directory or namespace names nothing there, and its name is not found")
    func movedAndCopiedEntries() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let other = Namespace(uid: 1001)
        for name in ["dir/one", "two", Self.long] {
            try fixture.store.write(Array(name.utf8), to: fixture.name(name), in: fixture.namespace, protection: .none)
        }
        try fixture.store.write([9], to: fixture.name("mine"), in: other, protection: .none)
        let files = try fixture.filesDirectory(), otherFiles = try fixture.filesDirectory(uid: other.uid)
        let one = try fixture.diskPath("dir/one"), two = try fixture.diskPath("two"), long = try fixture.diskPath(Self.long)
        let manager = FileManager.default

        // Moved up out of its directory: it names nothing, and dir/one is gone.
        try manager.moveItem(atPath: one, toPath: files + "/" + (one as NSString).lastPathComponent)
        #expect(try fixture.store.list(in: fixture.namespace).map(\.name.value) == [Self.long, "two"].sorted())
        #expect(notFound { _ = try fixture.store.read(fixture.name("dir/one"), in: fixture.namespace) })
        // Copied into a directory or into another namespace, with a long entry's sidecar too.
        let directory = (try fixture.diskPath("dir/placeholder") as NSString).deletingLastPathComponent
        try manager.copyItem(atPath: two, toPath: directory + "/" + (two as NSString).lastPathComponent)
        try manager.copyItem(atPath: two, toPath: otherFiles + "/" + (two as NSString).lastPathComponent)
        for path in [long, long + ".n"] {
            try manager.copyItem(atPath: path, toPath: otherFiles + "/" + (path as NSString).lastPathComponent)
            try manager.copyItem(atPath: path, toPath: directory + "/" + (path as NSString).lastPathComponent)
        }
        #expect(try fixture.store.list(in: other).map(\.name.value) == ["mine"])
        #expect(try fixture.store.list(in: fixture.namespace, prefix: "dir/").isEmpty)
        #expect(notFound { _ = try fixture.store.read(fixture.name("two"), in: other) })
        // What stayed in place still reads.
        #expect(try fixture.store.read(fixture.name("two"), in: fixture.namespace) == Array("two".utf8))
        #expect(try fixture.store.read(fixture.name(Self.long), in: fixture.namespace) == Array(Self.long.utf8))
    }

    @Test("two entries swapped on disk fail integrity instead of returning each other's content", arguments: ProtectionClass.allCases)
    func swappedEntries(protection: ProtectionClass) throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write(Array("first".utf8), to: fixture.name("x"), in: fixture.namespace, protection: protection)
        try fixture.store.write(Array("second".utf8), to: fixture.name("y"), in: fixture.namespace, protection: protection)
        let x = try fixture.diskPath("x"), y = try fixture.diskPath("y")
        try FileManager.default.moveItem(atPath: x, toPath: x + ".swap")
        try FileManager.default.moveItem(atPath: y, toPath: x)
        try FileManager.default.moveItem(atPath: x + ".swap", toPath: y)
        for name in ["x", "y"] {
            #expect(integrityFailure { _ = try fixture.store.read(fixture.name(name), in: fixture.namespace) }, "read \(name)")
            #expect(integrityFailure {
                try fixture.store.open(fixture.name(name), in: fixture.namespace, mode: .existing).close()
            }, "open \(name)")
        }
    }

    @Test("namespace directories swapped on disk: neither uid lists or reads the other's files")
    func swappedNamespaces() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let other = Namespace(uid: 1001)
        try fixture.store.write([1], to: fixture.name("shared-name"), in: fixture.namespace, protection: .none)
        try fixture.store.write([2], to: fixture.name("shared-name"), in: other, protection: .none)
        fixture.store.shutdown()
        let mine = try fixture.namespaceDirectory(), theirs = try fixture.namespaceDirectory(uid: other.uid)
        try FileManager.default.moveItem(atPath: mine, toPath: mine + ".swap")
        try FileManager.default.moveItem(atPath: theirs, toPath: mine)
        try FileManager.default.moveItem(atPath: mine + ".swap", toPath: theirs)
        try fixture.restart()
        for namespace in [fixture.namespace, other] {
            #expect(try fixture.store.list(in: namespace).isEmpty, "\(namespace)")
            #expect(notFound { _ = try fixture.store.read(fixture.name("shared-name"), in: namespace) }, "\(namespace)")
        }
    }

    @Test("an erase gives every namespace a new directory name")
    func eraseRenamesNamespaces() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([1], to: fixture.name("before"), in: fixture.namespace, protection: .none)
        let before = try fixture.namespaceDirectory()
        _ = try fixture.store.erase()
        try fixture.store.write([2], to: fixture.name("after"), in: fixture.namespace, protection: .none)
        #expect(try fixture.namespaceDirectory() != before)
        #expect(!FileManager.default.fileExists(atPath: before))
        try fixture.restart()
        #expect(try fixture.store.list(in: fixture.namespace).map(\.name.value) == ["after"])
    }
}
