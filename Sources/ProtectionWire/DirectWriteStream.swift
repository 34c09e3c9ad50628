/// The frames of a direct write after the daemon's `ok` (docs/PROTOCOL.md,
/// "Direct writes"): the daemon reads them from the socket itself, each
/// chunk's content straight into its batch, so they have fixed headers
/// that both sides build and read here instead of through `Frame`.
///
/// - chunk: `length | writeChunk | id | u32 count | count bytes`, as a
///   `writeChunk` frame;
/// - end: `length | writeEnd | id | u64 total`: the total lets the daemon
///   check that it read every byte the client sent;
/// - abort: `length | writeAbort | id`.
public enum DirectWriteStream {
    /// Bytes every frame starts with: length, type, request id.
    public static let prefixByteCount = Frame.prefixByteCount

    /// One frame's start, as read by the daemon.
    public enum Header: Equatable, Sendable {
        /// A chunk of `count` bytes follows.
        case chunk(count: Int)
        /// The end; its 8-byte total follows.
        case end
        /// The write is abandoned.
        case abort
    }

    /// The header of a chunk of `count` bytes.
    public static func chunkHeader(requestID: UInt32, count: Int) -> [UInt8] {
        bigEndian(UInt32(count + Frame.headerByteCount + 4)) + [MessageType.writeChunk.rawValue]
            + bigEndian(requestID) + bigEndian(UInt32(count))
    }

    /// The end frame of a write of `total` bytes.
    public static func end(requestID: UInt32, total: UInt64) -> [UInt8] {
        bigEndian(UInt32(Frame.headerByteCount + 8)) + [MessageType.writeEnd.rawValue] + bigEndian(requestID)
            + bigEndian(total)
    }

    /// The abort frame.
    public static func abort(requestID: UInt32) -> [UInt8] {
        bigEndian(UInt32(Frame.headerByteCount)) + [MessageType.writeAbort.rawValue] + bigEndian(requestID)
    }

    /// What a frame starting with `prefix` (its first `prefixByteCount`
    /// bytes) is. Anything but this write's chunk, end or abort, or a chunk
    /// over `maximumChunk` bytes, is a protocol violation. A chunk's 4-byte
    /// count follows the prefix; check it with `checkChunkCount`.
    public static func header(_ prefix: [UInt8], requestID: UInt32, maximumChunk: Int) throws -> Header {
        precondition(prefix.count == prefixByteCount, "a frame prefix is \(prefixByteCount) bytes")
        let length = Int(readBigEndian(prefix[0..<4], as: UInt32.self))
        let id = readBigEndian(prefix[5..<9], as: UInt32.self)
        guard id == requestID else {
            throw ProtocolViolation("a direct write carries only its own frames; got one for request \(id)")
        }
        switch MessageType(rawValue: prefix[4]) {
        case .writeChunk:
            let count = length - Frame.headerByteCount - 4
            guard count >= 0, count <= maximumChunk else {
                throw ProtocolViolation("a direct write's chunk frame of \(length) bytes does not hold 0-\(maximumChunk) bytes of content")
            }
            return .chunk(count: count)
        case .writeEnd:
            guard length == Frame.headerByteCount + 8 else {
                throw ProtocolViolation("a direct write's end carries its 8-byte total; its length was \(length)")
            }
            return .end
        case .writeAbort:
            guard length == Frame.headerByteCount else {
                throw ProtocolViolation("a direct write's abort has no body; its length was \(length)")
            }
            return .abort
        default:
            throw ProtocolViolation("a direct write carries only writeChunk, writeEnd and writeAbort; got type 0x\(String(prefix[4], radix: 16))")
        }
    }

    /// Checks a chunk's 4-byte count against the count its frame length gave.
    public static func checkChunkCount(_ bytes: [UInt8], expected: Int) throws {
        let count = Int(readBigEndian(bytes, as: UInt32.self))
        guard count == expected else {
            throw ProtocolViolation("a direct write's chunk says \(count) bytes; its frame holds \(expected)")
        }
    }

    /// A big-endian integer's bytes.
    public static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        (0..<(T.bitWidth / 8)).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    /// The integer in big-endian `bytes`.
    public static func readBigEndian<T: FixedWidthInteger>(_ bytes: some Collection<UInt8>, as: T.Type) -> T {
        bytes.reduce(T.zero) { $0 << 8 | T($1) }
    }
}
