public import NIOCore

/// One unit on the wire: `length (u32 BE) | type (u8) | request id (u32 BE) | body`.
/// `length` counts the type, id and body (so it is at least 5).
public struct Frame: Sendable, Equatable {
    /// Bytes before the body: type and request id.
    public static let headerByteCount = 5
    /// The message type byte (see `MessageType`).
    public var type: UInt8
    /// Matches a response to its request; 0 for events.
    public var requestID: UInt32
    /// The type-specific fields.
    public var body: ByteBuffer
    /// The end of the body, kept in a buffer of its own and sent from there:
    /// file content a client sends from where its caller holds it, instead
    /// of copying it behind the fields. Outgoing frames only (a decoded
    /// frame has none; `Request(frame:)` reads `wholeBody`). Frames
    /// compare body and tail each, so two with
    /// the same bytes on the wire, cut differently, are not equal.
    public var tail: ByteBuffer?

    /// Makes a frame.
    public init(type: UInt8, requestID: UInt32, body: ByteBuffer, tail: ByteBuffer? = nil) {
        self.type = type
        self.requestID = requestID
        self.body = body
        self.tail = tail
    }

    /// The body with the tail behind it (copied together when there is a
    /// tail): what the frame's fields are read from.
    public var wholeBody: ByteBuffer {
        guard var tail else { return body }
        var whole = body
        whole.writeBuffer(&tail)
        return whole
    }

    /// Bytes of the body on the wire, the tail included.
    public var wireBodyByteCount: Int { body.readableBytes + (tail?.readableBytes ?? 0) }
}

/// A violation of the protocol: the peer sent something that cannot be
/// understood. The connection answers with a `protocolError` and closes.
public struct ProtocolViolation: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    public let message: String

    /// Makes a violation.
    public init(_ message: String) { self.message = message }

    public var description: String { "protocol error: \(message)" }
}

/// Splits the byte stream into frames, refusing any frame longer than
/// `maximumFrameLength` before reading its body.
public struct FrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = Frame

    /// The largest `length` accepted.
    public let maximumFrameLength: Int
    /// Bodies at least this long are copied out of the receive buffer, each
    /// part as it arrives (so a frame that spans reads is not first stitched
    /// together by NIO's cumulation, a second copy); shorter ones (all, when
    /// nil) stay slices of it.
    public let copyThreshold: Int?
    /// Whether every byte is taken out of the receive buffer at once and
    /// zeroed there (`wiping(maximumFrameLength:)`).
    public let wipesInput: Bool
    /// A body being copied out as it arrives: its frame's type and id, the
    /// body so far, and how many bytes it still lacks.
    private var partial: (type: UInt8, requestID: UInt32, body: ByteBuffer, missing: Int)?
    /// With `wipesInput`: the start of a prefix that a read ended in.
    private var heldPrefix: [UInt8] = []

    /// Makes a decoder with a hard size limit, copying out bodies of
    /// `copyThreshold` bytes or more.
    public init(maximumFrameLength: Int, copyThreshold: Int? = nil) {
        self.init(maximumFrameLength: maximumFrameLength, copyThreshold: copyThreshold, wipesInput: false)
    }

    private init(maximumFrameLength: Int, copyThreshold: Int?, wipesInput: Bool) {
        self.maximumFrameLength = maximumFrameLength
        self.copyThreshold = copyThreshold
        self.wipesInput = wipesInput
    }

    /// The daemon's decoder: every body is copied out of the receive buffer
    /// as it arrives, into a buffer of its own, and every byte taken is
    /// zeroed there at once; the start of a prefix a read ended in is held
    /// too. So a receive buffer holds no content or passcode once decoded,
    /// no read is left for NIO to append the next one to (a copy it would
    /// free unzeroed), and no frame keeps a receive buffer of up to 1 MiB
    /// alive while it waits to be served. The client, which takes each
    /// frame at once, slices. Nobody else may read the bytes given to
    /// `decode`: they are zeroed in place.
    public static func wiping(maximumFrameLength: Int) -> FrameDecoder {
        FrameDecoder(maximumFrameLength: maximumFrameLength, copyThreshold: 0, wipesInput: true)
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> Frame? {
        guard wipesInput else { return try decodeFrame(from: &buffer) }
        let start = buffer.readerIndex
        defer { buffer.wipeBytes(start..<buffer.readerIndex) }
        if partial == nil && (!heldPrefix.isEmpty || buffer.readableBytes < Frame.prefixByteCount) {
            return try decodeHeldPrefix(from: &buffer)
        }
        return try decodeFrame(from: &buffer)
    }

    private mutating func decodeFrame(from buffer: inout ByteBuffer) throws -> Frame? {
        if partial != nil { return continuePartial(from: &buffer) }
        guard let length = try Self.frameLength(in: buffer, limit: maximumFrameLength) else { return nil }
        let bodyLength = length - Frame.headerByteCount
        if let copyThreshold, bodyLength >= copyThreshold {
            // Copied out as it arrives, whole or not: left in the receive
            // buffer, an unfinished body would have each read appended
            // behind it (NIO's cumulation), a second copy of every byte.
            guard buffer.readableBytes >= Frame.prefixByteCount else { return nil }
            startPartial(from: &buffer, bodyLength: bodyLength)
            return continuePartial(from: &buffer)
        }
        guard buffer.readableBytes >= 4 + length else { return nil }
        buffer.moveReaderIndex(forwardBy: 4)
        let type: UInt8 = buffer.readInteger()!
        let requestID: UInt32 = buffer.readInteger(endianness: .big)!
        return Frame(type: type, requestID: requestID, body: buffer.readSlice(length: bodyLength)!)
    }

    /// With `wipesInput`, a prefix that came (or may come) in more than
    /// one read: its bytes are held until it is whole, then its body is
    /// copied out as any other.
    private mutating func decodeHeldPrefix(from buffer: inout ByteBuffer) throws -> Frame? {
        heldPrefix += buffer.readBytes(length: min(Frame.prefixByteCount - heldPrefix.count, buffer.readableBytes))!
        var prefix = ByteBuffer(bytes: heldPrefix)
        guard let length = try Self.frameLength(in: prefix, limit: maximumFrameLength),
              prefix.readableBytes == Frame.prefixByteCount else { return nil }
        heldPrefix.removeAll()
        startPartial(from: &prefix, bodyLength: length - Frame.headerByteCount)
        return continuePartial(from: &buffer)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Frame? {
        if let frame = try decode(buffer: &buffer) { return frame }
        if seenEOF, let partial {
            throw ProtocolViolation("connection closed in the middle of a frame (\(partial.missing) bytes of its body missing)")
        }
        let left = buffer.readableBytes + heldPrefix.count
        if seenEOF && left > 0 {
            throw ProtocolViolation("connection closed in the middle of a frame (\(left) bytes left)")
        }
        return nil
    }

    /// The `length` field of the frame at the start of `buffer`; nil until
    /// its 4 bytes are there. Throws when it is out of bounds.
    private static func frameLength(in buffer: ByteBuffer, limit: Int) throws -> Int? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self) else {
            return nil
        }
        guard length >= Frame.headerByteCount else {
            throw ProtocolViolation("frame length \(length) is shorter than the \(Frame.headerByteCount)-byte frame header")
        }
        guard length <= limit else {
            throw ProtocolViolation("frame length \(length) exceeds the maximum of \(limit) bytes")
        }
        return Int(length)
    }

    /// Reads the prefix at the start of `buffer` (all of it there) and
    /// starts copying out a body of `bodyLength` bytes.
    private mutating func startPartial(from buffer: inout ByteBuffer, bodyLength: Int) {
        buffer.moveReaderIndex(forwardBy: 4)
        partial = (buffer.readInteger()!, buffer.readInteger(endianness: .big)!,
                   ByteBufferAllocator().buffer(capacity: bodyLength), bodyLength)
    }

    /// Copies what `buffer` holds of the partial body; the frame once whole.
    private mutating func continuePartial(from buffer: inout ByteBuffer) -> Frame? {
        // Taken out, so that the body is written in place, not copied first.
        guard var current = partial.take() else { return nil }
        var piece = buffer.readSlice(length: min(current.missing, buffer.readableBytes))!
        current.missing -= piece.readableBytes
        current.body.writeBuffer(&piece)
        guard current.missing == 0 else {
            partial = current
            return nil
        }
        return Frame(type: current.type, requestID: current.requestID, body: current.body)
    }
}

extension Frame {
    /// Bytes of the length prefix, type and request id before the body.
    public static let prefixByteCount = 4 + headerByteCount

    /// Appends the frame's wire form (length prefix, type, id, body) to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        encodeHead(into: &buffer)
        if var tail { buffer.writeBuffer(&tail) }
    }

    /// Appends the length prefix, type, id and body, without the tail.
    func encodeHead(into buffer: inout ByteBuffer) {
        encodePrefix(into: &buffer)
        var body = body
        buffer.writeBuffer(&body)
    }

    /// The frame's wire form in a buffer of its own, to send as it is
    /// (past `FrameWriter`).
    public func encoded() -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: Frame.prefixByteCount + wireBodyByteCount)
        encode(into: &buffer)
        return buffer
    }

    /// Appends the length prefix, type and request id, without the body.
    func encodePrefix(into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt32(Frame.headerByteCount + wireBodyByteCount), endianness: .big)
        buffer.writeInteger(type)
        buffer.writeInteger(requestID, endianness: .big)
    }
}

/// Writes frames with their length prefix. A frame whose body and tail
/// together are at most `copyLimit` bytes is copied into one buffer. Of a
/// larger one, the tail and a body over `copyLimit` are passed on as they
/// are, each after a buffer holding what comes before it (prefix and a
/// short body in one), so a data chunk is not copied on its way to the
/// socket (NIO sends them all in one writev). With `wipesContent`, every
/// buffer that held a frame's file content (`carriesContent`) is zeroed
/// once it is written, or could not be.
public final class FrameWriter: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = Frame
    public typealias OutboundOut = ByteBuffer

    /// The most bytes of body and tail copied behind the prefix.
    public static let copyLimit = 16 * 1024
    /// Whether content is zeroed once sent (the daemon's writer).
    public let wipesContent: Bool

    /// Makes a writer; the daemon's zeroes the content it sends.
    public init(wipesContent: Bool = false) {
        self.wipesContent = wipesContent
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        let buffers: [ByteBuffer]
        if frame.wireBodyByteCount <= Self.copyLimit {
            var buffer = context.channel.allocator.buffer(capacity: Frame.prefixByteCount + frame.wireBodyByteCount)
            frame.encode(into: &buffer)
            buffers = [buffer]
        } else if let tail = frame.tail, frame.body.readableBytes <= Self.copyLimit {
            var head = context.channel.allocator.buffer(capacity: Frame.prefixByteCount + frame.body.readableBytes)
            frame.encodeHead(into: &head)
            buffers = [head, tail]
        } else {
            var prefix = context.channel.allocator.buffer(capacity: Frame.prefixByteCount)
            frame.encodePrefix(into: &prefix)
            buffers = [prefix, frame.body] + (frame.tail.map { [$0] } ?? [])
        }
        let last = wipesContent && frame.carriesContent ? Self.wiping(buffers, frame, then: promise, on: context) : promise
        for (index, buffer) in buffers.enumerated() {
            context.write(wrapOutboundOut(buffer), promise: index == buffers.count - 1 ? last : nil)
        }
    }

    /// A promise for the last write of `frame` that, once it is done
    /// (written in order, so every buffer before it is too) or failed,
    /// zeroes `sent` and the frame's own buffers, then completes `promise`.
    private static func wiping(_ sent: [ByteBuffer], _ frame: Frame, then promise: EventLoopPromise<Void>?,
                               on context: ChannelHandlerContext) -> EventLoopPromise<Void> {
        let done = context.eventLoop.makePromise(of: Void.self)
        done.futureResult.whenComplete { result in
            for buffer in sent { buffer.wipeReadableBytes() }
            frame.wipeContent()
            promise?.completeWith(result)
        }
        return done
    }
}
