internal import Sodium

/// The fixed 140-byte header of every protected file (docs/FORMAT.md).
///
/// ```
/// 0   4  magic "PDFE"        7   1  wrapped-key length L (72 or 80)
/// 4   1  format version (1)  8   4  segment size, little endian
/// 5   1  algorithm (1..3)    12  16 file id
/// 6   1  protection class    28  80 wrapped file key (L bytes, zero padded)
/// 108 32 header tag: keyed BLAKE2b-256 over bytes 0..<108
/// ```
/// The slot for the wrapped key has the same size for every class, so a
/// class change rewrites the header only and never moves a segment.
struct FileHeader: Equatable {
    static let magic: [UInt8] = Array("PDFE".utf8)
    static let formatVersion: UInt8 = 1
    static let byteCount = 140
    static let wrappedKeySlotByteCount = 80
    static let taggedByteCount = 108
    static let tagByteCount = 32
    /// Bytes 0..<28: what a symmetric key wrap is bound to.
    static let wrapBindingByteCount = 28

    var algorithm: ContentCipher
    var protection: ProtectionClass
    var segmentSize: Int
    var fileID: [UInt8]
    var wrappedKey: [UInt8]
    var tag: [UInt8]

    /// Bytes 0..<108, which the tag covers.
    var taggedBytes: [UInt8] {
        var bytes = wrapBinding
        bytes += wrappedKey
        bytes += [UInt8](repeating: 0, count: Self.wrappedKeySlotByteCount - wrappedKey.count)
        return bytes
    }

    /// Bytes 0..<28 (magic through file id): the associated data of a
    /// symmetric key wrap, which binds the file key to this file and class.
    var wrapBinding: [UInt8] {
        var bytes = Self.magic
        bytes += [Self.formatVersion, algorithm.rawValue, protection.rawValue, UInt8(wrappedKey.count)]
        bytes.appendLittleEndian(UInt32(segmentSize))
        bytes += fileID
        return bytes
    }

    /// The 140 bytes on disk.
    var encoded: [UInt8] { taggedBytes + tag }

    /// Parses a header without any key. The tag is checked later by
    /// `FileKey.unwrap(_:keys:)`, once the file key is known.
    static func decode(_ bytes: [UInt8]) throws -> FileHeader {
        guard bytes.count == byteCount else { throw ProtectionError.integrity("file is shorter than its header") }
        var reader = ByteReader(bytes)
        guard reader.read(4) == magic else { throw ProtectionError.integrity("not a protd file: its magic bytes are wrong") }
        let version: UInt8 = reader.readLittleEndian()!
        guard version == formatVersion else {
            throw ProtectionError.integrity("unsupported file format version \(version)")
        }
        guard let algorithm = ContentCipher(rawValue: reader.readLittleEndian()!) else {
            throw ProtectionError.integrity("unknown content algorithm")
        }
        guard let protection = ProtectionClass(rawValue: reader.readLittleEndian()!) else {
            throw ProtectionError.integrity("unknown protection class")
        }
        let keyLength = Int(reader.readLittleEndian(UInt8.self)!)
        let segmentSize = Int(reader.readLittleEndian(UInt32.self)!)
        guard keyLength == FileKey.wrappedByteCount(for: protection) else {
            throw ProtectionError.integrity("wrapped key length does not match the class")
        }
        guard SegmentLayout.allowedSegmentSizes.contains(segmentSize) else {
            throw ProtectionError.integrity("segment size \(segmentSize) out of range")
        }
        let fileID = reader.read(16)!
        let slot = reader.read(wrappedKeySlotByteCount)!
        // The tag is computed over a zero-padded slot; reject other padding.
        guard slot[keyLength...].allSatisfy({ $0 == 0 }) else {
            throw ProtectionError.integrity("the file header was modified in its key slot padding")
        }
        return FileHeader(algorithm: algorithm, protection: protection, segmentSize: segmentSize, fileID: fileID,
                          wrappedKey: Array(slot[..<keyLength]), tag: reader.read(tagByteCount)!)
    }
}
