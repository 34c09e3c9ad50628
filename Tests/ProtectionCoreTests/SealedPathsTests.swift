@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

@Suite("Sealed paths remember directories")
struct SealedPathsTests {
    /// Each component sealed afresh under `names`, bound to the components before it.
    private func sealedAfresh(_ name: String, uid: UInt32, names: StoreNames) throws -> [StoreNames.Entry] {
        var parent = ""
        return try name.split(separator: "/").map { component in
            defer { parent = parent.isEmpty ? String(component) : parent + "/" + component }
            return try names.entry(for: Array(component.utf8), parent: parent, uid: uid)
        }
    }

    @Test("remembered entries are the ones sealing gives, at every depth, with long components and per namespace")
    func rememberedEqualsSealed() throws {
        let names = try StoreNames(classD: SecretBytes.random(count: 32))
        let paths = SealedPaths(names)
        let long = String(repeating: "L", count: 200)
        let samples = ["a", "a/b", "a/b/c", "a/c", "b/c", "\(long)/x", "\(long)/\(long)", "a/\(long)/z/y"]
        // Twice: the first pass fills the memory, the second reads it.
        for _ in 0..<2 {
            for name in samples {
                for uid: UInt32 in [0, 1000] {
                    #expect(try paths.entries(of: FileName(name), uid: uid) == sealedAfresh(name, uid: uid, names: names))
                }
            }
        }
        #expect(try paths.entries(of: FileName("a/b"), uid: 0) != paths.entries(of: FileName("a/b"), uid: 1000))
    }

    @Test("new keys forget every remembered directory")
    func newKeysForget() throws {
        let old = try StoreNames(classD: SecretBytes.random(count: 32))
        let new = try StoreNames(classD: SecretBytes.random(count: 32))
        let paths = SealedPaths(old)
        let before = try paths.entries(of: FileName("d/e/f"), uid: 5)
        paths.use(new)
        let after = try paths.entries(of: FileName("d/e/f"), uid: 5)
        #expect(after == (try sealedAfresh("d/e/f", uid: 5, names: new)))
        #expect(after[0] != before[0] && after[1] != before[1])
    }

    @Test("more directories than it remembers still seal correctly")
    func beyondCapacity() throws {
        let names = try StoreNames(classD: SecretBytes.random(count: 32))
        let paths = SealedPaths(names)
        for index in 0..<(SealedPaths.rememberedDirectories + 10) {
            _ = try paths.entries(of: FileName("dir\(index)/f"), uid: 1)
        }
        for index in [0, 1, SealedPaths.rememberedDirectories - 1, SealedPaths.rememberedDirectories + 9] {
            let name = "dir\(index)/f"
            #expect(try paths.entries(of: FileName(name), uid: 1) == sealedAfresh(name, uid: 1, names: names))
        }
    }
}
