import Foundation
@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

@Suite("Sealed entry names")
struct StoreNamesTests {
    private let names = try! StoreNames(classD: SecretBytes.random(count: 32))

    @Test("every component from 1 to 255 bytes round-trips through its entry; entries fit a file name; long ones have a sidecar")
    func roundTrip() throws {
        var random = SeededGenerator(seed: 0x37_0001)
        for length in 1...255 {
            var component = ""
            while component.utf8.count < length {
                let room = length - component.utf8.count
                component.append(["a", "z", "-", ".", "é", "😀"].filter { $0.utf8.count <= room }.randomElement(using: &random)!)
            }
            let bytes = Array(component.utf8)
            #expect(bytes.count == length)
            let entry = try names.entry(for: bytes, parent: "p/q", uid: 7)
            #expect(entry.name.utf8.count <= 255)
            #expect((entry.sidecar != nil) == (bytes.count > StoreNames.longestShortComponent))
            let back = names.component(of: entry.name, parent: "p/q", uid: 7) { $0 == entry.name + ".n" ? entry.sidecar : nil }
            #expect(back == component)
            #expect(names.component(of: entry.name, parent: "p/r", uid: 7) { _ in entry.sidecar } == nil)
            #expect(names.component(of: entry.name, parent: "p/q", uid: 8) { _ in entry.sidecar } == nil)
        }
    }

    @Test("namespace, short and long entries are docs/FORMAT.md section 4's, computed here from the SIV and the key labels")
    func knownLayout() throws {
        let classD = try SecretBytes(utf8: "a class D key of thirty-two bytes")
        let names = try StoreNames(classD: classD)
        let macKey = try KeyedBlake2b.deriveKey(key: classD, parts: [Array("protd.names.mac.v1".utf8)])
        let encryptionKey = try KeyedBlake2b.deriveKey(key: classD, parts: [Array("protd.names.encryption.v1".utf8)])
        func siv(_ plaintext: [UInt8], _ context: [UInt8]) throws -> [UInt8] {
            try SyntheticIV.seal(plaintext, context: context, macKey: macKey, encryptionKey: encryptionKey)
        }
        // uid 1000 is E8 03 00 00 as u32 LE.
        #expect(try names.namespaceEntry(1000) == Base64URL.encode(siv([0xE8, 0x03, 0, 0], [0x01])))

        let short = Array("report.pdf".utf8)  // 10 bytes, padded to 16
        let shortSealed = try siv(short + [UInt8](repeating: 0, count: 6), [0x02, 0xE8, 0x03, 0, 0] + Array("a/b".utf8))
        #expect(try names.entry(for: short, parent: "a/b", uid: 1000) == StoreNames.Entry(name: Base64URL.encode(shortSealed), sidecar: nil))
        let sixteen = Array("exactly16bytes!!".utf8)  // a multiple of 16: no padding
        #expect(try names.entry(for: sixteen, parent: "", uid: 1000).name == Base64URL.encode(siv(sixteen, [0x02, 0xE8, 0x03, 0, 0])))

        let long = [UInt8](repeating: UInt8(ascii: "L"), count: 200)  // padded to 208
        let longSealed = try siv(long + [UInt8](repeating: 0, count: 8), [0x02, 0xE8, 0x03, 0, 0] + Array("a".utf8))
        let longName = "~" + Base64URL.encode(try KeyedBlake2b.mac(key: macKey, parts: [[0x03], longSealed]))
        #expect(try names.entry(for: long, parent: "a", uid: 1000) == StoreNames.Entry(name: longName, sidecar: longSealed))
    }

    @Test("entries that protd did not make stand for nothing, and never trap")
    func foreignEntries() throws {
        var random = SeededGenerator(seed: 0x37_0002)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~.")
        let real = try names.entry(for: Array("x".utf8), parent: "", uid: 1)
        for _ in 0..<3_000 {
            let length = Int.random(in: 0...260, using: &random)
            var entry = String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
            if Bool.random(using: &random) { entry = "~" + entry }
            let sidecar = (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(names.component(of: entry, parent: "", uid: 1) { _ in sidecar } == nil || entry == real.name)
        }
        // One character changed in a real entry: nothing.
        for index in real.name.indices {
            var changed = Array(real.name)
            changed[real.name.distance(from: real.name.startIndex, to: index)] = real.name[index] == "A" ? "B" : "A"
            #expect(names.component(of: String(changed), parent: "", uid: 1) { _ in nil } == nil)
        }
        #expect(try names.uid(ofNamespaceEntry: names.namespaceEntry(42)) == 42)
        #expect(names.uid(ofNamespaceEntry: real.name) == nil, "a component's entry is no namespace")
        #expect(names.uid(ofNamespaceEntry: "1000") == nil)
    }
}
