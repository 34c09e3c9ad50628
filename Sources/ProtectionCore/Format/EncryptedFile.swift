internal import Glibc
internal import Sodium

/// Random-access reading and writing of one protected file's content.
/// Every operation touches only the segments its byte range covers (plus,
/// when a file grows or shrinks, the segment that gains or loses the final
/// flag). Not thread-safe: `ProtectedFileHandle` serialises access.
final class EncryptedFile {
    let path: String
    private(set) var header: FileHeader
    private let fd: Int32
    private let key: FileKey
    private let layout: SegmentLayout
    /// Plaintext size in bytes.
    private(set) var size: Int
    /// Counts the writes and truncates made through this open file, so a
    /// read of several calls can tell whether it saw one version.
    private(set) var version: UInt64 = 0
    /// One segment of plaintext and of ciphertext, allocated for the span
    /// of one operation only, so idle open files cost no buffer memory
    /// (10,000 open handles would otherwise hold 1.3 GB).
    private var plain: [UInt8] = []
    private var stored: [UInt8] = []
    private var closed = false
    /// Set by `create`: the new name is durable only once the directory
    /// holding it is fsynced, which the first flush does.
    private var directoryNeedsSync = false

    private init(fd: Int32, path: String, header: FileHeader, key: FileKey, size: Int) {
        self.fd = fd
        self.path = path
        self.header = header
        self.key = key
        self.layout = SegmentLayout(segmentSize: header.segmentSize, cipher: header.algorithm)
        self.size = size
    }

    /// Writes a new, empty file into `fd` (header and one empty final
    /// segment) and returns it open. The file key is wrapped for
    /// `protection` with the keys in `keys`, the header bound to
    /// `binding`. On success the file owns `fd`; on failure the caller still does.
    static func create(
        fd: Int32, path: String, protection: ProtectionClass, format: ContentFormat, binding: FileBinding, keys: ClassKeys
    ) throws -> EncryptedFile {
        let (key, header) = try FileKey.newFile(protection: protection, format: format, binding: binding, keys: keys)
        try header.encoded.withUnsafeBytes { try Posix.pwrite(fd, $0, at: 0, path: path) }
        let file = EncryptedFile(fd: fd, path: path, header: header, key: key, size: 0)
        defer { file.releaseBuffers() }
        do {
            try file.sealAndWrite(index: 0, length: 0, final: true)
            try Posix.truncate(fd, to: file.layout.fileLength(forSize: 0), path: path)
        } catch {
            file.abandon()
            throw error
        }
        file.directoryNeedsSync = true
        return file
    }

    /// Opens an existing file in `fd`, which should be at `binding`:
    /// unwraps its key with `keys`, checks the header tag (and so the
    /// binding) and the final segment, so the size is authenticated.
    /// The file is read first, then the key work runs in one window of the
    /// keys' slab (`ClassKeys.withSlabWritable`) with no I/O in it.
    static func open(fd: Int32, path: String, binding: FileBinding, keys: ClassKeys) throws -> EncryptedFile {
        let header = try readHeader(fd: fd, path: path, binding: binding)
        let layout = SegmentLayout(segmentSize: header.segmentSize, cipher: header.algorithm)
        guard let size = layout.plaintextSize(forFileLength: try Posix.size(fd, path: path)) else {
            throw ProtectionError.integrity("file length does not match whole segments (truncated?)")
        }
        let last = layout.lastIndex(forSize: size)
        let stored = try readStored(fd: fd, path: path, layout: layout, segments: last...last, size: size)
        return try keys.withSlabWritable(for: header.protection) {
            let file = EncryptedFile(fd: fd, path: path, header: header, key: try FileKey.unwrap(header, keys: keys),
                                     size: size)
            do {
                // Authenticates the final segment; copies none of it.
                try file.openSegments(stored, last...last, copying: size..<size,
                                      into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
            } catch {
                file.abandon()
                throw error
            }
            return file
        }
    }

    /// A one-off read of the file in `fd` when it holds at most `limit`
    /// plaintext bytes (else nil, and nothing was decrypted): its segments
    /// are read with one `pread`, then `deliver` gets the byte count of
    /// `range` (clipped to the file) and a function that fills a buffer of
    /// that size. That function does all the key work in one read-only
    /// window on the class key, with no I/O in it
    /// (`ClassKeys.withClassKeyReadable`): unwraps the file key into
    /// scratch memory, checks the header tag, opens every segment (so the
    /// size is authenticated), copies `range` and wipes the key. A small
    /// file's read so makes no key memory writable and changes page
    /// protection once, not three times as open, read and close would. On
    /// failure nothing decrypted is left in the buffer. Leaves `fd` to the
    /// caller.
    static func readWhole<R>(
        fd: Int32, path: String, binding: FileBinding, keys: ClassKeys, range: Range<Int>, ifAtMost limit: Int,
        _ deliver: (_ count: Int, _ fill: (UnsafeMutableRawBufferPointer) throws -> Void) throws -> R
    ) throws -> R? {
        let header = try readHeader(fd: fd, path: path, binding: binding)
        let layout = SegmentLayout(segmentSize: header.segmentSize, cipher: header.algorithm)
        guard let size = layout.plaintextSize(forFileLength: try Posix.size(fd, path: path)) else {
            throw ProtectionError.integrity("file length does not match whole segments (truncated?)")
        }
        guard size <= limit else { return nil }
        let segments = 0...layout.lastIndex(forSize: size)
        let stored = try readStored(fd: fd, path: path, layout: layout, segments: segments, size: size)
        let wanted = min(range.lowerBound, size)..<min(range.upperBound, size)
        return try deliver(wanted.count) { destination in
            precondition(destination.count >= wanted.count, "destination too small for the bytes requested")
            do {
                try keys.withClassKeyReadable(for: header.protection) {
                    let file = EncryptedFile(fd: fd, path: path, header: header,
                                             key: try FileKey.unwrap(header, keys: keys), size: size)
                    defer { file.abandon() }
                    try file.openSegments(stored, segments, copying: wanted, into: destination)
                }
            } catch {
                Zeroing.wipe(UnsafeMutableRawBufferPointer(rebasing: destination[..<wanted.count]))
                throw error
            }
        }
    }

    /// Reads and parses the header of the file in `fd`, at `binding`, without any key.
    static func readHeader(fd: Int32, path: String, binding: FileBinding) throws -> FileHeader {
        var bytes = [UInt8](repeating: 0, count: FileHeader.byteCount)
        let read = try bytes.withUnsafeMutableBytes { try Posix.pread(fd, into: $0, at: 0, path: path) }
        guard read == FileHeader.byteCount else { throw ProtectionError.integrity("file is shorter than its header") }
        return try FileHeader.decode(bytes, binding: binding)
    }

    /// Up to `count` bytes from `offset` (fewer at end of file).
    func read(offset: Int, count: Int) throws -> [UInt8] {
        try checkOpen()
        guard offset >= 0, count >= 0 else { throw ProtectionError(.invalidArgument, "offset and length must not be negative") }
        let available = offset < size ? min(count, size - offset) : 0
        return try [UInt8](unsafeUninitializedCapacity: available) { buffer, initialized in
            initialized = try read(offset: offset, count: available, into: UnsafeMutableRawBufferPointer(buffer))
        }
    }

    /// Decrypts up to `count` bytes from `offset` (fewer at end of file)
    /// into `destination`, which must hold them; returns how many. Each run
    /// of up to `SegmentLayout.batchSegments` segments is read with one
    /// `pread`, then opened in one read-only key window, each segment
    /// straight into `destination` when the range covers it whole. On
    /// failure nothing decrypted is left in `destination`.
    func read(offset: Int, count: Int, into destination: UnsafeMutableRawBufferPointer) throws -> Int {
        try checkOpen()
        guard offset >= 0, count >= 0 else { throw ProtectionError(.invalidArgument, "offset and length must not be negative") }
        guard offset < size, count > 0 else { return 0 }
        let end = offset + min(count, size - offset)
        precondition(destination.count >= end - offset, "destination too small for the bytes requested")
        let last = (end - 1) / layout.segmentSize
        do {
            for first in stride(from: offset / layout.segmentSize, through: last, by: SegmentLayout.batchSegments) {
                let segments = first...min(last, first + SegmentLayout.batchSegments - 1)
                let range = max(offset, first * layout.segmentSize)..<min(end, (segments.upperBound + 1) * layout.segmentSize)
                try openSegments(try readStored(segments), segments, copying: range,
                                 into: UnsafeMutableRawBufferPointer(
                                     rebasing: destination[(range.lowerBound - offset)..<(range.upperBound - offset)]))
            }
        } catch {
            Zeroing.wipe(UnsafeMutableRawBufferPointer(rebasing: destination[..<(end - offset)]))
            throw error
        }
        return end - offset
    }

    /// The stored bytes of `segments` (back to back, as on disk), with one
    /// `pread`. Ciphertext only: no key is needed, and none is readable.
    private func readStored(_ segments: ClosedRange<Int>) throws -> [UInt8] {
        try Self.readStored(fd: fd, path: path, layout: layout, segments: segments, size: size)
    }

    private static func readStored(
        fd: Int32, path: String, layout: SegmentLayout, segments: ClosedRange<Int>, size: Int
    ) throws -> [UInt8] {
        let start = layout.offset(ofSegment: segments.lowerBound)
        let end = layout.offset(ofSegment: segments.upperBound)
            + layout.plaintextLength(ofSegment: segments.upperBound, size: size) + layout.overhead
        return try [UInt8](unsafeUninitializedCapacity: end - start) { buffer, initialized in
            guard try Posix.pread(fd, into: UnsafeMutableRawBufferPointer(buffer), at: start, path: path) == end - start else {
                throw ProtectionError.integrity("segment \(segments.upperBound) is truncated")
            }
            initialized = end - start
        }
    }

    /// Opens the stored `segments` (as `readStored` returns them) in one
    /// read-only key window, doing no I/O in it, and copies their plaintext
    /// bytes `range` (file offsets) into `destination`. Every segment is
    /// authenticated, even one `range` leaves out.
    private func openSegments(
        _ stored: [UInt8], _ segments: ClosedRange<Int>, copying range: Range<Int>,
        into destination: UnsafeMutableRawBufferPointer
    ) throws {
        let lastOfFile = layout.lastIndex(forSize: size)
        let base = layout.offset(ofSegment: segments.lowerBound)
        try stored.withUnsafeBytes { stored in
            try key.holdingAccess {
                for index in segments {
                    let start = index * layout.segmentSize
                    let length = layout.plaintextLength(ofSegment: index, size: size)
                    let at = layout.offset(ofSegment: index) - base
                    let from = min(max(range.lowerBound, start), start + length)
                    let to = max(min(range.upperBound, start + length), from)
                    // A segment outside `range` is authenticated, not copied.
                    let target = from < to
                        ? UnsafeMutableRawBufferPointer(
                            rebasing: destination[(from - range.lowerBound)..<(to - range.lowerBound)])
                        : UnsafeMutableRawBufferPointer(start: nil, count: 0)
                    try openSegment(UnsafeRawBufferPointer(rebasing: stored[at..<(at + length + layout.overhead)]),
                                    index, final: index == lastOfFile, range: (from - start)..<(to - start), into: target)
                }
            }
        }
    }

    /// Opens one stored segment and copies its plaintext bytes `range`
    /// into `target`: straight into it when `range` is the whole segment.
    private func openSegment(
        _ sealed: UnsafeRawBufferPointer, _ index: Int, final: Bool, range: Range<Int>,
        into target: UnsafeMutableRawBufferPointer
    ) throws {
        let length = sealed.count - layout.overhead
        if range == 0..<length {
            return try key.openSegment(sealed, index: index, final: final, fileID: header.fileID, into: target)
        }
        let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: max(length, 1), alignment: 16)
        defer {
            Zeroing.wipe(plain)
            plain.deallocate()
        }
        try key.openSegment(sealed, index: index, final: final, fileID: header.fileID,
                            into: UnsafeMutableRawBufferPointer(rebasing: plain[..<length]))
        target.copyMemory(from: UnsafeRawBufferPointer(rebasing: plain[range]))
    }

    /// Writes `data` at `offset`, growing the file (with zeros in any gap)
    /// when it ends past the current size.
    func write(_ data: UnsafeRawBufferPointer, at offset: Int) throws {
        try checkOpen()
        defer { releaseBuffers() }
        try Self.checkRange(offset, data.count)
        guard data.count > 0 else { return }
        version &+= 1
        try rewrite(from: offset, count: data.count, data: data)
    }

    /// Cuts the file to `newSize`, or grows it with zeros.
    func truncate(to newSize: Int) throws {
        try checkOpen()
        defer { releaseBuffers() }
        try Self.checkRange(newSize, 0)
        if newSize != size { version &+= 1 }
        if newSize > size {
            try rewrite(from: size, count: newSize - size, data: nil)
        } else if newSize < size {
            let last = layout.lastIndex(forSize: newSize)
            let length = layout.plaintextLength(ofSegment: last, size: newSize)
            if length > 0 { _ = try readAndOpen(index: last) }
            try sealAndWrite(index: last, length: length, final: true)
            try Posix.truncate(fd, to: layout.fileLength(forSize: newSize), path: path)
            size = newSize
        }
    }

    /// Rewraps the file key for `protection` and rewrites the header in
    /// place, as version 2 (bound to the file's name and owner); no
    /// segment changes. Returns the flush that makes it durable,
    /// to run after the file's lock is released.
    func changeProtection(to protection: ProtectionClass, keys: ClassKeys) throws -> FileFlush {
        try checkOpen()
        let updated = try key.makeHeader(protection: protection, segmentSize: header.segmentSize,
                                         fileID: header.fileID, binding: header.binding, keys: keys)
        // Before the header changes, so running out of descriptors changes nothing.
        let durable = try flush()
        try updated.encoded.withUnsafeBytes { try Posix.pwrite(fd, $0, at: 0, path: path) }
        header = updated
        return durable
    }

    /// What brings content to stable storage, to run after the file's lock
    /// is released; after `create`, it fsyncs the directory too, so the
    /// file's name survives a crash (`directoryFlushed()` once it did).
    func flush() throws -> FileFlush {
        try checkOpen()
        return try FileFlush(duplicating: fd, path: path, includesDirectory: directoryNeedsSync)
    }

    /// A flush that included the directory succeeded.
    func directoryFlushed() {
        directoryNeedsSync = false
    }

    /// Wipes the file key and closes the descriptor. Idempotent.
    func close() {
        guard !closed else { return }
        release()
        Glibc.close(fd)
    }

    /// On a failed `create`/`open`: wipes the key but leaves the descriptor
    /// to the caller, who still owns it (closing it twice could close a
    /// descriptor another thread has just been given).
    private func abandon() {
        guard !closed else { return }
        release()
    }

    private func release() {
        closed = true
        key.wipe()
        releaseBuffers()
    }

    /// Makes the segment buffers big enough for `length` plaintext bytes
    /// (a small file never pays for a whole segment of buffer).
    private func ensureBuffers(for length: Int) {
        if plain.count < length || plain.isEmpty {
            zeroFill(&plain)
            let capacity = max(length, min(layout.segmentSize, 4096))
            plain = [UInt8](repeating: 0, count: capacity)
            stored = [UInt8](repeating: 0, count: capacity + layout.overhead)
        }
    }

    /// Zeroes the plaintext buffer and frees both.
    private func releaseBuffers() {
        zeroFill(&plain)
        plain = []
        stored = []
    }

    /// Whether the key was wiped from under the file (lock invalidation).
    var isInvalidated: Bool { closed || key.isWiped }

    deinit { close() }

    // MARK: - Segments

    /// Re-encrypts every segment that `[offset, offset+count)` touches,
    /// plus the segment that stops being final when the file grows (and the
    /// new segments between it and the range); no other. `data` nil means
    /// zeros.
    ///
    /// Segments go out last to first, and each one's bytes past the old
    /// end of the file before those within it: so every byte the file
    /// gains is written before any byte it had is overwritten. When one of
    /// those new bytes cannot be written (a full disk), the file is cut
    /// back to its old length, which leaves the old content whole.
    private func rewrite(from offset: Int, count: Int, data: UnsafeRawBufferPointer?) throws {
        let oldSize = size
        let oldEnd = layout.fileLength(forSize: oldSize)
        let end = offset + count
        let newSize = max(oldSize, end)
        ensureBuffers(for: min(layout.segmentSize, newSize))
        var first = offset / layout.segmentSize
        if newSize > oldSize { first = min(first, layout.lastIndex(forSize: oldSize)) }
        let finalIndex = layout.lastIndex(forSize: newSize)
        for index in stride(from: (end - 1) / layout.segmentSize, through: first, by: -1) {
            let sealed = try rewriteSegment(index, oldSize: oldSize, newSize: newSize, finalIndex: finalIndex,
                                            from: offset, to: end, data: data)
            let at = layout.offset(ofSegment: index)
            try stored.withUnsafeBytes { storedBuffer in
                let region = UnsafeRawBufferPointer(rebasing: storedBuffer[..<sealed])
                let kept = min(max(oldEnd - at, 0), sealed)
                do {
                    try Posix.pwrite(fd, UnsafeRawBufferPointer(rebasing: region[kept...]), at: at + kept, path: path)
                } catch {
                    try? Posix.truncate(fd, to: oldEnd, path: path)
                    throw error
                }
                try Posix.pwrite(fd, UnsafeRawBufferPointer(rebasing: region[..<kept]), at: at, path: path)
            }
        }
        size = newSize
    }

    /// One segment of `rewrite`: its old plaintext where `[offset, end)`
    /// does not cover it, the new bytes where it does, sealed into
    /// `stored`; returns the sealed length.
    private func rewriteSegment(_ index: Int, oldSize: Int, newSize: Int, finalIndex: Int,
                                from offset: Int, to end: Int, data: UnsafeRawBufferPointer?) throws -> Int {
        let start = index * layout.segmentSize
        let newLength = layout.plaintextLength(ofSegment: index, size: newSize)
        let oldLength = layout.plaintextLength(ofSegment: index, size: oldSize)
        let fullyCovered = data != nil && offset <= start && end >= start + newLength
        if !fullyCovered {
            if oldLength > 0 { _ = try readAndOpen(index: index) }
            plain.withUnsafeMutableBytes { buffer in
                _ = memset(buffer.baseAddress! + oldLength, 0, max(0, newLength - oldLength))
            }
        }
        let from = max(offset, start)
        let to = min(end, start + newLength)
        if to > from {
            plain.withUnsafeMutableBytes { buffer in
                if let data {
                    _ = memcpy(buffer.baseAddress! + (from - start), data.baseAddress! + (from - offset), to - from)
                } else {
                    _ = memset(buffer.baseAddress! + (from - start), 0, to - from)
                }
            }
        }
        return try seal(index: index, length: newLength, final: index == finalIndex)
    }

    /// Reads and decrypts segment `index` of the current size into `plain`;
    /// returns its plaintext length.
    private func readAndOpen(index: Int) throws -> Int {
        let length = layout.plaintextLength(ofSegment: index, size: size)
        ensureBuffers(for: length)
        let stored = try readStored(index...index)
        let start = index * layout.segmentSize
        try plain.withUnsafeMutableBytes { plainBuffer in
            try openSegments(stored, index...index, copying: start..<(start + length),
                             into: UnsafeMutableRawBufferPointer(rebasing: plainBuffer[..<length]))
        }
        return length
    }

    /// Encrypts `plain[0..<length]` as segment `index`, then writes it.
    private func sealAndWrite(index: Int, length: Int, final: Bool) throws {
        let storedLength = try seal(index: index, length: length, final: final)
        try stored.withUnsafeBytes { storedBuffer in
            try Posix.pwrite(fd, UnsafeRawBufferPointer(rebasing: storedBuffer[..<storedLength]),
                             at: layout.offset(ofSegment: index), path: path)
        }
    }

    /// Encrypts `plain[0..<length]` as segment `index` into `stored`;
    /// returns the sealed length.
    private func seal(index: Int, length: Int, final: Bool) throws -> Int {
        ensureBuffers(for: length)
        let storedLength = length + layout.overhead
        try stored.withUnsafeMutableBytes { storedBuffer in
            try plain.withUnsafeBytes { plainBuffer in
                try key.sealSegment(UnsafeRawBufferPointer(rebasing: plainBuffer[..<length]), index: index, final: final,
                                    fileID: header.fileID, into: UnsafeMutableRawBufferPointer(rebasing: storedBuffer[..<storedLength]))
            }
        }
        return storedLength
    }

    /// Largest plaintext size a file may reach: 2^48 bytes (256 TiB), far
    /// beyond any disk here, and small enough that no offset arithmetic
    /// can overflow.
    static let maximumSize = 1 << 48

    private static func checkRange(_ offset: Int, _ count: Int) throws {
        guard offset >= 0, count >= 0, offset <= maximumSize - count else {
            throw ProtectionError(.invalidArgument, "offset and size must be within 0...\(maximumSize) bytes")
        }
    }

    private func checkOpen() throws {
        if closed { throw ProtectionError(.handleClosed, "the file handle is closed") }
        if key.isWiped {
            throw ProtectionError.invalidated("this handle")
        }
    }
}

/// Zeroes an array that held plaintext or key bytes (`Zeroing`).
func zeroFill(_ bytes: inout [UInt8]) {
    Zeroing.wipe(&bytes)
}
