import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

@Suite("File names")
struct FileNameTests {
    @Test("reasonable relative names are accepted", arguments: ["a", "notes/a.txt", "x/y/z", ".hidden", "a..b", "ünïcode/名前"])
    func accepted(name: String) throws {
        #expect(try FileName(name).value == name)
    }

    @Test("dangerous or malformed names are refused with invalidName",
          arguments: ["", "/etc/passwd", "../x", "a/../b", "a/..", ".", "a/./b", "a//b", "a/", "nul\u{0}byte",
                      String(repeating: "x", count: 256), String(repeating: "a/", count: 600) + "a"])
    func refused(name: String) {
        let error = #expect(throws: ProtectionError.self) { try FileName(name) }
        #expect(error?.code == .invalidName)
    }

    @Test("names are equal by their bytes: composed and decomposed forms are two names, and two files")
    func equalityIsByBytes() throws {
        let composed = try FileName("caf\u{E9}"), decomposed = try FileName("cafe\u{301}")
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed, try FileName("caf\u{E9}")]).count == 2)
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([1], to: composed, in: fixture.namespace)
        try fixture.store.write([2], to: decomposed, in: fixture.namespace)
        #expect(try fixture.store.read(composed, in: fixture.namespace) == [1])
        #expect(try fixture.store.read(decomposed, in: fixture.namespace) == [2])
        #expect(try fixture.store.list(in: fixture.namespace).count == 2)
    }

    @Test("a name cannot be both a file and a directory")
    func fileVersusDirectory() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([1], to: fixture.name("a"), in: fixture.namespace)
        let error = #expect(throws: ProtectionError.self) {
            try fixture.store.write([2], to: fixture.name("a/b"), in: fixture.namespace)
        }
        #expect(error?.code == .invalidName)
        #expect(try fixture.store.read(fixture.name("a"), in: fixture.namespace) == [1])
    }

    @Test("list filters by prefix and reports class and size")
    func listing() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([1, 2], to: fixture.name("notes/a"), in: fixture.namespace, protection: .none)
        try fixture.store.write([1, 2, 3], to: fixture.name("notes/b"), in: fixture.namespace, protection: .complete)
        try fixture.store.write([1], to: fixture.name("other"), in: fixture.namespace)
        let notes = try fixture.store.list(in: fixture.namespace, prefix: "notes/")
        #expect(notes.map(\.name.value) == ["notes/a", "notes/b"])
        #expect(notes.map(\.protection) == [.none, .complete])
        #expect(notes.map(\.size) == [2, 3])
        #expect(try fixture.store.list(in: fixture.namespace).count == 3)
        #expect(try fixture.store.list(in: fixture.namespace, prefix: "no").count == 2)
    }

    @Test("a failed whole-file write leaves the old content and no temporary file")
    func failedWriteLosesNothing() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        try fixture.store.write([1, 2, 3], to: fixture.name("keep"), in: fixture.namespace, protection: .complete)
        _ = try fixture.store.requestLock(grace: .zero)
        let error = #expect(throws: ProtectionError.self) {
            try fixture.store.write([9], to: fixture.name("keep"), in: fixture.namespace, protection: .complete)
        }
        #expect(error?.code == .protectedDataUnavailable)
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        #expect(try fixture.store.read(fixture.name("keep"), in: fixture.namespace) == [1, 2, 3])
        let scratch = try fixture.scratchDirectory()
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)
    }
}
