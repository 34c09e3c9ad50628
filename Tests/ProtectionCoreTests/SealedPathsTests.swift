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
    }

    @Test("directories whose names differ in bytes but are canonically equivalent are remembered apart")
    func canonicallyEquivalentDirectoriesStayApart() throws {
        let names = try StoreNames(classD: SecretBytes.random(count: 32))
        let paths = SealedPaths(names)
        let composed = "caf\u{E9}/a", decomposed = "cafe\u{301}/b"
        #expect(Array(composed.utf8.prefix(5)) != Array(decomposed.utf8.prefix(5)))
        for name in [composed, decomposed, composed, decomposed] {
            #expect(try paths.entries(of: FileName(name), uid: 7) == sealedAfresh(name, uid: 7, names: names))
        }
    }

    @Test("new keys forget every remembered directory")
    func newKeysForget() throws {
        let old = try StoreNames(classD: SecretBytes.random(count: 32))
        let new = try StoreNames(classD: SecretBytes.random(count: 32))
        let paths = SealedPaths(old)
        _ = try paths.entries(of: FileName("d/e/f"), uid: 5)
        #expect(paths.rememberedEntryCount == 2)
        paths.use(new)
        #expect(paths.rememberedEntryCount == 0)
        #expect(try paths.entries(of: FileName("d/e/f"), uid: 5) == sealedAfresh("d/e/f", uid: 5, names: new))
    }

    @Test("the memory stays within its entry count, for many directories and for deep ones, and still seals correctly")
    func bounded() throws {
        let names = try StoreNames(classD: SecretBytes.random(count: 32))
        let paths = SealedPaths(names)
        _ = try paths.entries(of: FileName("top-level"), uid: 1)
        #expect(paths.rememberedEntryCount == 0, "a top-level name has no directory to remember")
        _ = try paths.entries(of: FileName("a/b/c"), uid: 1)
        _ = try paths.entries(of: FileName("a/b/d"), uid: 1)
        #expect(paths.rememberedEntryCount == 2, "a/b is remembered once, as its two entries")

        let deep = String(repeating: "d/", count: 400) + "f"
        var largest = 0
        for index in 0..<(SealedPaths.rememberedEntries / 2) {
            _ = try paths.entries(of: FileName("dir\(index)/sub/f"), uid: 1)
            if index % 50 == 0 { _ = try paths.entries(of: FileName("\(index)/" + deep), uid: 1) }
            largest = max(largest, paths.rememberedEntryCount)
        }
        #expect(largest <= SealedPaths.rememberedEntries)
        #expect(largest > SealedPaths.rememberedEntries / 2, "it remembered directories until it was full")
        for name in ["dir0/sub/f", "dir\(SealedPaths.rememberedEntries / 2 - 1)/sub/f", "0/" + deep] {
            #expect(try paths.entries(of: FileName(name), uid: 1) == sealedAfresh(name, uid: 1, names: names))
        }
    }
}
