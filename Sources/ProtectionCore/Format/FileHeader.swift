internal import Sodium

/// The fixed 140-byte header of every protected file (docs/FORMAT.md).
///
/// ```
/// 0   4  magic "PDFE"        7   1  wrapped-key length L (72 or 80)
/// 4   1  format version (2)  8   4  segment size, little endian
/// 5   1  algorithm (1..3)    12  16 file id
/// 6   1  protection class    28  80 wrapped file key (L bytes, zero padded)
/// 108 32 header tag: keyed BLAKE2b-256 over bytes 0..<108 and the binding
/// ```
/// The slot for the wrapped key has the same size for every class, so a
/// class change rewrites the header only and never moves a segment.
/// Version 2 binds the file to its namespace and name (`FileBinding`);
/// version 1, which did not, is read until every file was rewritten as 2.
struct FileHeader: Equatable {
    static let magic: [UInt8] = Array("PDFE".utf8)
    /// The version protd writes.
    static let formatVersion: UInt8 = 2
    static let byteCount = 140
    static let wrappedKeySlotByteCount = 80
    static let taggedByteCount = 108
    static let tagByteCount = 32
    /// Bytes 0..<28: what a symmetric key wrap is bound to.
    static let wrapBindingByteCount = 28

    var version: UInt8 = Self.formatVersion
    /// Where the file is: not stored in the header, but bound into its key
    /// slot and tag from version 2 on.
    var binding: FileBinding
    var algorithm: ContentCipher
    var protection: ProtectionClass
    var segmentSize: Int
    var fileID: [UInt8]
    var wrappedKey: [UInt8]
    var tag: [UInt8]

    /// What the tag covers: bytes 0..<108, then (version 2) the binding.
    var tagInput: [UInt8] {
        version == 1 ? taggedBytes : taggedBytes + binding.bytes
    }

    /// Bytes 0..<108.
    private var taggedBytes: [UInt8] {
        var bytes = leadingBytes
        bytes += wrappedKey
        bytes += [UInt8](repeating: 0, count: Self.wrappedKeySlotByteCount - wrappedKey.count)
        return bytes
    }

    /// The associated data of a symmetric key wrap, which binds the file
    /// key to this file, class and (version 2) namespace and name.
    var wrapBinding: [UInt8] {
        version == 1 ? leadingBytes : leadingBytes + binding.bytes
    }

    /// Bytes 0..<28: magic through file id.
    private var leadingBytes: [UInt8] {
        var bytes = Self.magic
        bytes += [version, algorithm.rawValue, protection.rawValue, UInt8(wrappedKey.count)]
        bytes.appendLittleEndian(UInt32(segmentSize))
        bytes += fileID
        return bytes
    }

    /// The 140 bytes on disk.
    var encoded: [UInt8] { taggedBytes + tag }

    /// Parses a header without any key, for the file at `binding`. The tag
    /// is checked later by `FileKey.unwrap(_:keys:)`, once the file key is known.
    static func decode(_ bytes: [UInt8], binding: FileBinding) throws -> FileHeader {
        guard bytes.count == byteCount else { throw ProtectionError.integrity("file is shorter than its header") }
        var reader = ByteReader(bytes)
        guard reader.read(4) == magic else { throw ProtectionError.integrity("not a protd file: its magic bytes are wrong") }
        let version: UInt8 = reader.readLittleEndian()!
        guard version == 1 || version == formatVersion else {
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
        return FileHeader(version: version, binding: binding, algorithm: algorithm, protection: protection,
                          segmentSize: segmentSize, fileID: fileID, wrappedKey: Array(slot[..<keyLength]),
                          tag: reader.read(tagByteCount)!)
    }
}
