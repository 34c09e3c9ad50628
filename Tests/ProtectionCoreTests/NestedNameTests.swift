import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

@Suite("Names with directories")
struct NestedNameTests {
    @Test("deep and sibling names create their directories once, private to the owner, and read back")
    func deepAndSiblingNames() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let names = ["a/b/c/d", "a/b/e", "a/f", "g"]
        for (index, name) in names.enumerated() {
            try fixture.store.write([UInt8(index)], to: fixture.name(name), in: fixture.namespace, durable: true)
        }
        for (index, name) in names.enumerated() {
            #expect(try fixture.store.read(fixture.name(name), in: fixture.namespace) == [UInt8(index)])
        }
        for directory in ["a", "a/b", "a/b/c"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: try fixture.diskPath(directory))
            #expect(attributes[.type] as? FileAttributeType == .typeDirectory)
            #expect((attributes[.posixPermissions] as? Int) == 0o700, "\(directory)")
        }
    }

    @Test("a name below an existing file is refused with an error, and the file is kept")
    func nameBelowAFile() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([1], to: fixture.name("plain"), in: fixture.namespace)
        #expect(throws: (any Error).self) {
            try fixture.store.write([2], to: fixture.name("plain/inner"), in: fixture.namespace)
        }
        #expect(try fixture.store.read(fixture.name("plain"), in: fixture.namespace) == [1])
    }
}
