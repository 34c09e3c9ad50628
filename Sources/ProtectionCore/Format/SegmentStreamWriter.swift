internal import Glibc
internal import Sodium

/// Writes a new protected file front to back from a stream of bytes: the
/// header, then every segment as soon as it is full and known not to be the
/// last, then the final segment on `finish()`. Full segments are sealed
/// straight from the caller's bytes, each batch in one read-only key window
/// with no I/O in it, and then written with one `pwrite`
/// (`SealedBatchWriter`). Only the tail that might be final is copied and held back.
/// Every byte is encrypted once, whatever the sizes of the pieces appended.
/// Calls are serialised, so `discard()` may come from another thread.
final class SegmentStreamWriter {
    private let fd: Int32
    private let path: String
    private let key: FileKey
    private let header: FileHeader
    private let layout: SegmentLayout
    /// Plaintext of the last, possibly final segment (at most one segment).
    private var pending: [UInt8] = []
    /// Sealed batches on their way to disk.
    private let output: SealedBatchWriter
    private var nextIndex = 0
    /// The header, until it goes out in front of the first batch written:
    /// any file then costs one `pwrite` fewer.
    private var unwrittenHeader: [UInt8]?
    /// Plaintext bytes appended so far.
    private(set) var size = 0
    /// Serialises every call with `discard()`, which a lock makes from
    /// another thread.
    private let access = LockedState(())

    /// Starts a new file in `protection` in `fd`, bound to `binding`; its
    /// header is written with the first segment.
    init(fd: Int32, path: String, protection: ProtectionClass, format: ContentFormat, binding: FileBinding,
         keys: ClassKeys) throws {
        self.fd = fd
        self.path = path
        (key, header) = try FileKey.newFile(protection: protection, format: format, binding: binding, keys: keys)
        layout = SegmentLayout(segmentSize: format.segmentSize, cipher: format.cipher)
        unwrittenHeader = header.encoded
        output = SealedBatchWriter(fd: fd, path: path)
    }

    /// Adds bytes at the end; fails once `discard()` ran.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        try access.withLock { _ in
            // Held back after a discard, the bytes would outlive the lock that discarded the write.
            guard !key.isWiped else { throw ProtectionError.invalidated("this write") }
            try appendUnlocked(bytes)
        }
    }

    private func appendUnlocked(_ bytes: UnsafeRawBufferPointer) throws {
        guard size <= EncryptedFile.maximumSize - bytes.count else {
            throw ProtectionError(.invalidArgument, "file would exceed \(EncryptedFile.maximumSize) bytes")
        }
        guard !bytes.isEmpty else { return }
        let segmentSize = layout.segmentSize
        // Top up the held-back segment first.
        var offset = pending.isEmpty ? 0 : min(segmentSize - pending.count, bytes.count)
        if offset > 0 { pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<offset])) }
        // A full segment can be sealed once at least one byte follows it.
        let sealPending = pending.count == segmentSize && offset < bytes.count
        var direct: [Range<Int>] = []
        while bytes.count - offset > segmentSize {
            direct.append(offset..<(offset + segmentSize))
            offset += segmentSize
        }
        if sealPending || !direct.isEmpty {
            try pending.withUnsafeBytes { held in
                var sources = sealPending ? [held] : []
                sources += direct.map { UnsafeRawBufferPointer(rebasing: bytes[$0]) }
                try seal(sources, lastIsFinal: false)
            }
        }
        if sealPending { clearPending() }
        if offset < bytes.count {
            if pending.isEmpty { pending.reserveCapacity(segmentSize) }
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
        }
        size += bytes.count
    }

    /// Writes the final segment, then wipes the key and the plaintext held back.
    func finish() throws {
        try access.withLock { _ in
            defer { discardUnlocked() }
            try pending.withUnsafeBytes { try seal([$0], lastIsFinal: true) }
        }
    }

    /// Wipes the key and the plaintext held back without finishing; later
    /// appends and `finish()` fail. From any thread (a lock invalidating a
    /// class A write): it waits for an append in progress.
    func discard() {
        access.withLock { _ in discardUnlocked() }
    }

    private func discardUnlocked() {
        key.wipe()
        clearPending()
    }

    /// Seals `sources` as the next segments and writes them, in batches of
    /// at most `SegmentLayout.batchSegments`: each batch is sealed in one
    /// read-only key window, then written with one `pwrite` once the window
    /// is closed; the first batch carries the header.
    private func seal(_ sources: [UnsafeRawBufferPointer], lastIsFinal: Bool) throws {
        let stride = layout.storedSegmentSize
        for batchStart in Swift.stride(from: 0, to: sources.count, by: SegmentLayout.batchSegments) {
            let batch = batchStart..<min(sources.count, batchStart + SegmentLayout.batchSegments)
            let first = nextIndex
            let headerBytes = unwrittenHeader ?? []
            unwrittenHeader = nil
            // The header, until written, goes out in front of the first batch.
            let prefix = headerBytes.count
            let storedBytes = prefix + (batch.count - 1) * stride + sources[batch.last!].count + layout.overhead
            let output = self.output.nextBuffer(count: storedBytes)
            if prefix > 0 { output.copyBytes(from: headerBytes) }
            try key.holdingAccess {
                for source in batch {
                    let start = prefix + (source - batchStart) * stride
                    let region = UnsafeMutableRawBufferPointer(
                        rebasing: output[start..<(start + sources[source].count + layout.overhead)])
                    try key.sealSegment(sources[source], index: first + source - batchStart,
                                        final: lastIsFinal && source == sources.count - 1,
                                        fileID: header.fileID, into: region)
                }
            }
            // One pwrite for the batch, one batch at a time: two threads
            // writing into one file contend for its inode lock
            // (docs/DESIGN.md, section Writes).
            try self.output.write(count: storedBytes, at: layout.offset(ofSegment: first) - prefix)
            nextIndex += batch.count
        }
    }

    private func clearPending() {
        zeroFill(&pending)
        pending.removeAll(keepingCapacity: true)
    }
}
