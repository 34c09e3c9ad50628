internal import Glibc
internal import Sodium

/// Writes a new protected file front to back from a stream of bytes: the
/// header, then each segment as soon as it is full and known not to be the
/// last, then the final segment on `finish()`. Every byte is encrypted
/// once, whatever the sizes of the pieces appended, and memory stays at one
/// segment.
final class SegmentStreamWriter {
    private let fd: Int32
    private let path: String
    private let key: FileKey
    private let header: FileHeader
    private let layout: SegmentLayout
    private var pending: [UInt8]
    private var stored: [UInt8]
    private var nextIndex = 0
    /// Plaintext bytes appended so far.
    private(set) var size = 0

    /// Writes the header of a new file in `protection` into `fd`.
    init(fd: Int32, path: String, protection: ProtectionClass, segmentSize: Int, keys: ClassKeys) throws {
        self.fd = fd
        self.path = path
        (key, header) = try FileKey.newFile(protection: protection, segmentSize: segmentSize, keys: keys)
        layout = SegmentLayout(segmentSize: segmentSize)
        pending = []
        pending.reserveCapacity(segmentSize)
        stored = [UInt8](repeating: 0, count: segmentSize + SegmentLayout.overhead)
        try header.encoded.withUnsafeBytes { try Posix.pwrite(fd, $0, at: 0, path: path) }
    }

    /// Adds bytes at the end.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard size <= EncryptedFile.maximumSize - bytes.count else {
            throw ProtectionError(.invalidArgument, "file would exceed \(EncryptedFile.maximumSize) bytes")
        }
        var offset = 0
        while offset < bytes.count {
            if pending.count == layout.segmentSize { try flush(final: false) }
            let take = min(layout.segmentSize - pending.count, bytes.count - offset)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)]))
            offset += take
        }
        size += bytes.count
    }

    /// Writes the final segment and wipes the key.
    func finish() throws {
        defer { discard() }
        try flush(final: true)
    }

    /// Wipes only the key; safe from another thread (a lock invalidating
    /// a class A write). Later appends and `finish()` then fail.
    func wipeKey() { key.wipe() }

    /// Wipes the key and the buffered plaintext without finishing.
    func discard() {
        key.wipe()
        zeroFill(&pending)
        pending.removeAll()
    }

    private func flush(final: Bool) throws {
        let length = pending.count
        try stored.withUnsafeMutableBytes { storedBuffer in
            let region = UnsafeMutableRawBufferPointer(rebasing: storedBuffer[..<(length + SegmentLayout.overhead)])
            try pending.withUnsafeBytes { plain in
                try key.sealSegment(plain, index: nextIndex, final: final, fileID: header.fileID, into: region)
            }
            try Posix.pwrite(fd, UnsafeRawBufferPointer(region), at: layout.offset(ofSegment: nextIndex), path: path)
        }
        zeroFill(&pending)
        pending.removeAll(keepingCapacity: true)
        nextIndex += 1
    }
}
