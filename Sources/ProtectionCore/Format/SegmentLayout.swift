internal import Sodium

/// Where segments sit in a protected file and how plaintext offsets map to
/// them. Segment `i` holds plaintext bytes `i*S ..< min((i+1)*S, size)` and
/// is stored as `nonce || ciphertext || tag` at `140 + i*(S+overhead)`: a
/// 24-byte nonce and a 16-byte tag (overhead 40) for XChaCha20-Poly1305 and
/// AES-256-GCM, 32 and 32 (overhead 64) for AEGIS-256. An empty file still
/// has one (empty, final) segment.
struct SegmentLayout: Equatable {
    /// The default plaintext bytes per segment.
    static let defaultSegmentSize = 64 * 1024
    /// Segment sizes the format accepts: 1 KiB to 16 MiB.
    static let allowedSegmentSizes = 1024...(16 << 20)
    /// Most segments one step of an operation reads or seals together (4 MiB
    /// at the default segment size): bounds the buffers it allocates.
    static let batchSegments = 64

    /// Plaintext bytes per segment.
    let segmentSize: Int
    /// Bytes each stored segment adds to its plaintext: nonce and tag.
    let overhead: Int

    /// The layout of segments of `segmentSize` plaintext bytes sealed with `cipher`.
    init(segmentSize: Int, cipher: ContentCipher) {
        self.segmentSize = segmentSize
        overhead = cipher.aead.nonceByteCount + cipher.aead.tagByteCount
    }

    /// Stored bytes per full segment.
    var storedSegmentSize: Int { segmentSize + overhead }

    /// Index of the last segment of a file of `size` plaintext bytes.
    func lastIndex(forSize size: Int) -> Int {
        size == 0 ? 0 : (size - 1) / segmentSize
    }

    /// Plaintext bytes in segment `index` of a file of `size` bytes.
    func plaintextLength(ofSegment index: Int, size: Int) -> Int {
        max(0, min(segmentSize, size - index * segmentSize))
    }

    /// File offset of segment `index`.
    func offset(ofSegment index: Int) -> Int {
        FileHeader.byteCount + index * storedSegmentSize
    }

    /// Stored file length for `size` plaintext bytes.
    func fileLength(forSize size: Int) -> Int {
        let last = lastIndex(forSize: size)
        return offset(ofSegment: last) + plaintextLength(ofSegment: last, size: size) + overhead
    }

    /// The plaintext size implied by a stored file length, or `nil` when no
    /// well-formed file has that length (a torn or truncated segment).
    func plaintextSize(forFileLength length: Int) -> Int? {
        let body = length - FileHeader.byteCount
        guard body >= overhead else { return nil }
        let fullSegments = (body - 1) / storedSegmentSize
        let lastStored = body - fullSegments * storedSegmentSize
        guard lastStored >= overhead else { return nil }
        let lastPlain = lastStored - overhead
        // Only an empty file has an empty final segment.
        guard lastPlain > 0 || fullSegments == 0 else { return nil }
        return fullSegments * segmentSize + lastPlain
    }
}
