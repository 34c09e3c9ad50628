import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

@Suite("Streamed whole-file writes")
struct StreamingWriteTests {
    @Test("content appended in pieces of any size reads back exactly", arguments: [1, 7, 1023, 1024, 1025, 5000])
    func piecesOfAnySize(pieceSize: Int) throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        var random = SeededGenerator(seed: UInt64(pieceSize))
        let content = (0..<(4 * 1024 + 3)).map { _ in UInt8.random(in: 0...255, using: &random) }
        let pending = try fixture.store.beginWrite(to: fixture.name("streamed"), in: fixture.namespace, durable: false)
        var offset = 0
        while offset < content.count {
            let end = min(content.count, offset + pieceSize)
            try pending.append(Array(content[offset..<end]))
            offset = end
        }
        #expect(try pending.commit() == content.count)
        #expect(try fixture.store.read(fixture.name("streamed"), in: fixture.namespace) == content)
    }

    @Test("a commit fsyncs the data before the rename whether durable or not, and only a durable one the directory too",
          arguments: [false, true])
    func commitFsyncsTheData(durable: Bool) throws {
        let fixture = try StoreFixture()
        let pending = try fixture.store.beginWrite(to: fixture.name("synced"), in: fixture.namespace, durable: durable)
        try pending.append(Array("content".utf8))
        let before = Posix.fsyncsOnThisThread
        try pending.commit()
        // Without the data's fsync, a crash after the rename could leave the name on data never written.
        #expect(Posix.fsyncsOnThisThread - before == (durable ? 2 : 1))
    }

    @Test("pieces of mixed sizes, some spanning more segments than one sealing batch, read back exactly")
    func mixedPiecesAcrossBatches() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        var random = SeededGenerator(seed: 42)
        let content = (0..<(300 * 1024 + 5)).map { _ in UInt8.random(in: 0...255, using: &random) }
        let sizes = [1, 1023, 1024, 1025, 70_000, 150_000, 3]
        let pending = try fixture.store.beginWrite(to: fixture.name("mixed"), in: fixture.namespace, durable: false)
        var offset = 0
        var turn = 0
        while offset < content.count {
            let end = min(content.count, offset + sizes[turn % sizes.count])
            try pending.append(Array(content[offset..<end]))
            offset = end
            turn += 1
        }
        #expect(try pending.commit() == content.count)
        #expect(try fixture.store.read(fixture.name("mixed"), in: fixture.namespace) == content)
    }

    @Test("any byte range of a many-segment file reads back exactly those bytes")
    func rangesOfManySegments() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        var random = SeededGenerator(seed: 7)
        let content = (0..<(20 * 1024 + 7)).map { _ in UInt8.random(in: 0...255, using: &random) }
        try fixture.store.write(content, to: fixture.name("ranges"), in: fixture.namespace)
        for _ in 0..<200 {
            let offset = Int.random(in: 0...(content.count + 10), using: &random)
            let count = Int.random(in: 0...(8 * 1024), using: &random)
            let expected = offset < content.count ? Array(content[offset..<min(content.count, offset + count)]) : []
            let read = try fixture.store.read(fixture.name("ranges"), in: fixture.namespace, offset: offset, count: count)
            #expect(read == expected, "offset \(offset), count \(count)")
        }
    }

    @Test("an exact multiple of the segment size ends with a full final segment")
    func exactMultiple() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.store.write([UInt8](repeating: 5, count: 2048), to: fixture.name("two"), in: fixture.namespace)
        let path = try fixture.diskPath("two")
        let length = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
        #expect(length == 140 + 2 * (1024 + StoreFixture.segmentOverhead(fixture.configuration.cipher)))
        #expect(try fixture.store.read(fixture.name("two"), in: fixture.namespace) == [UInt8](repeating: 5, count: 2048))
    }

    @Test("an aborted write leaves the old content and no temporary file")
    func abortKeepsOldContent() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let name = fixture.name("kept")
        try fixture.store.write([1, 2, 3], to: name, in: fixture.namespace)
        let pending = try fixture.store.beginWrite(to: name, in: fixture.namespace)
        try pending.append([UInt8](repeating: 9, count: 5000))
        pending.abort()
        #expect(try fixture.store.read(name, in: fixture.namespace) == [1, 2, 3])
        let scratch = try fixture.scratchDirectory()
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)
        #expect(throws: ProtectionError.self) { try pending.commit() }
    }

    @Test("a class A write in progress when a lock completes takes no more content and leaves nothing behind",
          arguments: [10, 3000])
    func classAWriteInvalidatedByLock(appendedAfterLock count: Int) throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        let pending = try fixture.store.beginWrite(to: fixture.name("secret"), in: fixture.namespace, protection: .complete)
        try pending.append([UInt8](repeating: 1, count: 1500))
        _ = try fixture.store.requestLock(grace: .zero)
        // Ten bytes fit in the held-back segment, so taking them needs no
        // key; they are refused all the same.
        let error = #expect(throws: ProtectionError.self) { try pending.append([UInt8](repeating: 2, count: count)) }
        #expect(error?.code == .protectedDataUnavailable)
        #expect(try fixture.store.list(in: fixture.namespace).isEmpty)
        let scratch = try fixture.scratchDirectory()
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)
    }
}
