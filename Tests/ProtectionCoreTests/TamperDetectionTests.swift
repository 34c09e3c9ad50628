import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

/// Every kind of offline modification of a stored file must surface as an
/// integrity failure, never as a crash or wrong plaintext.
@Suite("Tamper detection in the file format")
struct TamperDetectionTests {
    static let segmentSize = 1024
    static let headerSize = 140

    /// Stored bytes of a full segment with `cipher`.
    private func storedSegment(_ cipher: ContentCipher) -> Int { Self.segmentSize + StoreFixture.segmentOverhead(cipher) }

    /// A store with two class C files of 2.5 segments each.
    private func fixtureWithFiles(_ cipher: ContentCipher) throws -> (StoreFixture, String, String) {
        let fixture = try StoreFixture(segmentSize: Self.segmentSize, cipher: cipher)
        let content = (0..<(Self.segmentSize * 5 / 2)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try fixture.store.write(content, to: fixture.name("a"), in: fixture.namespace)
        try fixture.store.write(content.reversed(), to: fixture.name("b"), in: fixture.namespace)
        return (fixture, try fixture.diskPath("a"), try fixture.diskPath("b"))
    }

    private func load(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }
    private func save(_ bytes: [UInt8], _ path: String) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }

    /// Reads the whole file and a range in its first segment; both must fail
    /// with an integrity error (or, for a class byte changed to one whose key
    /// is missing, unavailability), never return data.
    private func expectRejected(_ fixture: StoreFixture, _ name: String = "a", because comment: Comment) {
        for attempt in 0..<2 {
            do {
                let data = attempt == 0
                    ? try fixture.store.read(fixture.name(name), in: fixture.namespace)
                    : try fixture.store.read(fixture.name(name), in: fixture.namespace, offset: 0, count: 10)
                Issue.record("tampered file was read (\(data.count) bytes): \(comment)")
            } catch let error as ProtectionError {
                #expect(error.code == .integrityFailure || error.code == .protectedDataUnavailable, comment)
            } catch {
                Issue.record("unexpected error type \(error): \(comment)")
            }
        }
    }

    @Test("flipping any single byte of a small file is detected", arguments: StoreFixture.ciphers)
    func everyByteFlip(cipher: ContentCipher) throws {
        let fixture = try StoreFixture(segmentSize: Self.segmentSize, cipher: cipher)
        try fixture.store.write(Array("small secret".utf8), to: fixture.name("a"), in: fixture.namespace)
        let path = try fixture.diskPath("a")
        let original = try load(path)
        #expect(original.count == Self.headerSize + 12 + StoreFixture.segmentOverhead(cipher))
        for index in original.indices {
            var tampered = original
            tampered[index] ^= 0x01
            try save(tampered, path)
            expectRejected(fixture, because: "byte \(index) flipped")
        }
        try save(original, path)
        #expect(try fixture.store.read(fixture.name("a"), in: fixture.namespace) == Array("small secret".utf8))
    }

    @Test("flipping a byte in every segment of a multi-segment file is detected", arguments: StoreFixture.ciphers)
    func flipInEverySegment(cipher: ContentCipher) throws {
        let (fixture, path, _) = try fixtureWithFiles(cipher)
        let original = try load(path)
        let nonce = StoreFixture.segmentNonceBytes(cipher)
        for segment in 0..<3 {
            for offsetInSegment in [0, nonce - 1, nonce, 100, storedSegment(cipher) - 1] {
                let index = Self.headerSize + segment * storedSegment(cipher) + offsetInSegment
                guard index < original.count else { continue }
                var tampered = original
                tampered[index] ^= 0x80
                try save(tampered, path)
                do {
                    _ = try fixture.store.read(fixture.name("a"), in: fixture.namespace)
                    Issue.record("segment \(segment) byte \(offsetInSegment) flip not detected")
                } catch let error as ProtectionError {
                    #expect(error.code == .integrityFailure)
                }
            }
        }
    }

    @Test("truncating at and between segment boundaries is detected", arguments: StoreFixture.ciphers)
    func truncation(cipher: ContentCipher) throws {
        let (fixture, path, _) = try fixtureWithFiles(cipher)
        let original = try load(path)
        let overhead = StoreFixture.segmentOverhead(cipher)
        let stored = storedSegment(cipher)
        let cuts = [0, 1, Self.headerSize - 1, Self.headerSize, Self.headerSize + overhead - 1, Self.headerSize + overhead,
                    Self.headerSize + stored, Self.headerSize + stored + 1,
                    Self.headerSize + 2 * stored, Self.headerSize + 2 * stored + 50,
                    original.count - 1]
        for cut in cuts {
            try save(Array(original[..<cut]), path)
            expectRejected(fixture, because: "truncated to \(cut) bytes")
        }
    }

    @Test("extending a file with extra bytes or a copied segment is detected", arguments: StoreFixture.ciphers)
    func appendedData(cipher: ContentCipher) throws {
        let (fixture, path, _) = try fixtureWithFiles(cipher)
        let original = try load(path)
        try save(original + [0], path)
        expectRejected(fixture, because: "one byte appended")
        let firstSegment = Array(original[Self.headerSize..<(Self.headerSize + storedSegment(cipher))])
        try save(original + firstSegment, path)
        expectRejected(fixture, because: "segment 0 appended")
    }

    @Test("swapping two segments is detected", arguments: StoreFixture.ciphers)
    func swapSegments(cipher: ContentCipher) throws {
        let (fixture, path, _) = try fixtureWithFiles(cipher)
        var bytes = try load(path)
        let first = Self.headerSize
        let stored = storedSegment(cipher)
        let second = Self.headerSize + stored
        let a = Array(bytes[first..<second])
        bytes.replaceSubrange(first..<second, with: bytes[second..<(second + stored)])
        bytes.replaceSubrange(second..<(second + stored), with: a)
        try save(bytes, path)
        expectRejected(fixture, because: "segments 0 and 1 swapped")
    }

    @Test("splicing a segment from another file is detected", arguments: StoreFixture.ciphers)
    func spliceFromOtherFile(cipher: ContentCipher) throws {
        let (fixture, pathA, pathB) = try fixtureWithFiles(cipher)
        var a = try load(pathA)
        let b = try load(pathB)
        let range = Self.headerSize..<(Self.headerSize + storedSegment(cipher))
        a.replaceSubrange(range, with: b[range])
        try save(a, pathA)
        expectRejected(fixture, because: "segment 0 from file b")
    }

    @Test("swapping headers between files is detected", arguments: StoreFixture.ciphers)
    func swapHeaders(cipher: ContentCipher) throws {
        let (fixture, pathA, pathB) = try fixtureWithFiles(cipher)
        var a = try load(pathA)
        var b = try load(pathB)
        let headerA = Array(a[..<Self.headerSize])
        a.replaceSubrange(..<Self.headerSize, with: b[..<Self.headerSize])
        b.replaceSubrange(..<Self.headerSize, with: headerA)
        try save(a, pathA)
        try save(b, pathB)
        expectRejected(fixture, "a", because: "header of b on a")
        expectRejected(fixture, "b", because: "header of a on b")
    }

    @Test("a random-access read of a truncated file fails when the file is opened", arguments: StoreFixture.ciphers)
    func rangedReadSeesTruncation(cipher: ContentCipher) throws {
        let (fixture, path, _) = try fixtureWithFiles(cipher)
        let original = try load(path)
        try save(Array(original[..<(Self.headerSize + 2 * storedSegment(cipher))]), path)
        let error = #expect(throws: ProtectionError.self) {
            try fixture.store.open(fixture.name("a"), in: fixture.namespace, mode: .existing)
        }
        #expect(error?.code == .integrityFailure)
    }
}
