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

    /// Makes a frame.
    public init(type: UInt8, requestID: UInt32, body: ByteBuffer) {
        self.type = type
        self.requestID = requestID
        self.body = body
    }
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

    /// Makes a decoder with a hard size limit.
    public init(maximumFrameLength: Int) {
        self.maximumFrameLength = maximumFrameLength
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> Frame? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self) else {
            return nil
        }
        guard length >= Frame.headerByteCount else {
            throw ProtocolViolation("frame length \(length) is shorter than the \(Frame.headerByteCount)-byte frame header")
        }
        guard length <= maximumFrameLength else {
            throw ProtocolViolation("frame length \(length) exceeds the maximum of \(maximumFrameLength) bytes")
        }
        guard buffer.readableBytes >= 4 + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: 4)
        let type: UInt8 = buffer.readInteger()!
        let requestID: UInt32 = buffer.readInteger(endianness: .big)!
        let body = buffer.readSlice(length: Int(length) - Frame.headerByteCount)!
        return Frame(type: type, requestID: requestID, body: body)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Frame? {
        if let frame = try decode(buffer: &buffer) { return frame }
        if seenEOF && buffer.readableBytes > 0 {
            throw ProtocolViolation("connection closed in the middle of a frame (\(buffer.readableBytes) bytes left)")
        }
        return nil
    }
}

/// Writes frames with their length prefix.
public struct FrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = Frame

    /// Makes an encoder.
    public init() {}

    public func encode(data frame: Frame, out: inout ByteBuffer) throws {
        out.writeInteger(UInt32(Frame.headerByteCount + frame.body.readableBytes), endianness: .big)
        out.writeInteger(frame.type)
        out.writeInteger(frame.requestID, endianness: .big)
        var body = frame.body
        out.writeBuffer(&body)
    }
}
