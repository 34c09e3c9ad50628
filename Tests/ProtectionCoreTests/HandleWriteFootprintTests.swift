import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

/// A write through a handle re-encrypts only the segments its range covers,
/// plus the old final segment when the file grows. Every rewritten segment
/// gets a fresh random nonce, so the segments whose stored bytes changed
/// are exactly the segments that were written.
@Suite("Handle writes rewrite only the segments they touch")
struct HandleWriteFootprintTests {
    static let segment = 1024
    static let headerSize = 140
    static let segments = 64

    /// A class C file of 64 full segments (byte `i` is `i * 7`), its path
    /// on disk and a handle on it; the store lives as long as this does.
    private struct BigFile {
        let fixture: StoreFixture
        let path: String
        let handle: ProtectedFileHandle

        init(_ cipher: ContentCipher) throws {
            fixture = try StoreFixture(segmentSize: HandleWriteFootprintTests.segment, cipher: cipher)
            let name = fixture.name("big")
            let size = HandleWriteFootprintTests.segments * HandleWriteFootprintTests.segment
            try fixture.store.write((0..<size).map(BigFile.byte), to: name, in: fixture.namespace)
            path = try fixture.diskPath("big")
            handle = try fixture.store.open(name, in: fixture.namespace, mode: .existing)
        }

        static func byte(at offset: Int) -> UInt8 { UInt8(truncatingIfNeeded: offset &* 7) }
    }

    /// Indices of the segments whose stored bytes differ between `before`
    /// and `after` (a segment present in only one of them counts).
    private func changedSegments(_ before: [UInt8], _ after: [UInt8], cipher: ContentCipher) -> [Int] {
        let stride = Self.segment + StoreFixture.segmentOverhead(cipher)
        let count = (max(before.count, after.count) - Self.headerSize + stride - 1) / stride
        return (0..<count).filter { index in
            let start = Self.headerSize + index * stride
            func slice(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
                bytes[min(start, bytes.count)..<min(start + stride, bytes.count)]
            }
            return slice(before) != slice(after)
        }
    }

    private func load(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

    /// Writes `bytes` at `offset` through `handle` and returns the changed segments.
    private func segmentsWritten(by bytes: [UInt8], at offset: Int, in file: BigFile, cipher: ContentCipher) throws -> [Int] {
        let before = try load(file.path)
        try file.handle.write(bytes, at: offset)
        return changedSegments(before, try load(file.path), cipher: cipher)
    }

    @Test("a one-byte write in the middle of a 64-segment file rewrites one segment", arguments: StoreFixture.ciphers)
    func oneByteInTheMiddle(cipher: ContentCipher) throws {
        let file = try BigFile(cipher)
        defer { file.handle.close() }
        let offset = 32 * Self.segment + 5
        #expect(try segmentsWritten(by: [0xAB], at: offset, in: file, cipher: cipher) == [32])
        #expect(try file.handle.read(offset: offset - 1, count: 3) == [BigFile.byte(at: offset - 1), 0xAB,
                                                                 BigFile.byte(at: offset + 1)])
    }

    @Test("a write across a segment boundary rewrites the two segments it spans", arguments: StoreFixture.ciphers)
    func acrossOneBoundary(cipher: ContentCipher) throws {
        let file = try BigFile(cipher)
        defer { file.handle.close() }
        let bytes = [UInt8](repeating: 0xCD, count: 6)
        #expect(try segmentsWritten(by: bytes, at: 10 * Self.segment - 3, in: file, cipher: cipher)
            == [9, 10])
        #expect(try file.handle.read(offset: 10 * Self.segment - 3, count: 6) == bytes)
    }

    @Test("a write that grows the file rewrites the old final segment and adds the new ones only",
          arguments: StoreFixture.ciphers)
    func growingAtTheEnd(cipher: ContentCipher) throws {
        let file = try BigFile(cipher)
        defer { file.handle.close() }
        let size = Self.segments * Self.segment
        let bytes = [UInt8](repeating: 0xEF, count: 2 * Self.segment + 500)
        #expect(try segmentsWritten(by: bytes, at: size - 10, in: file, cipher: cipher)
            == [63, 64, 65, 66])
        #expect(try file.handle.size() == size - 10 + bytes.count)
        #expect(try file.handle.read(offset: size - 10, count: bytes.count) == bytes)
    }

    @Test("a write past the end rewrites the old final segment and writes the gap and the new segments",
          arguments: StoreFixture.ciphers)
    func pastTheEnd(cipher: ContentCipher) throws {
        let file = try BigFile(cipher)
        defer { file.handle.close() }
        let size = Self.segments * Self.segment
        let offset = size + 2 * Self.segment + 100
        #expect(try segmentsWritten(by: [1, 2, 3], at: offset, in: file, cipher: cipher)
            == [63, 64, 65, 66])
        #expect(try file.handle.read(offset: size - 1, count: offset - size + 4)
            == [BigFile.byte(at: size - 1)] + [UInt8](repeating: 0, count: offset - size) + [1, 2, 3])
    }
}
