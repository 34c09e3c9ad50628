public import NIOCore
public import ProtectionModel

/// Everything the daemon sends (docs/PROTOCOL.md, "Responses" and "Events").
public enum Response: Sendable, Equatable {
    /// Success with nothing to report.
    case ok
    /// The hello was accepted: the version chosen, the frame limit and the
    /// peer's identity as the daemon sees it.
    case helloAccepted(version: UInt16, maximumFrameLength: UInt32, uid: UInt32, gid: UInt32)
    /// Answer to `status`.
    case status(StatusReport)
    /// A size in bytes (writes, appends, truncates, handleSize).
    case size(UInt64)
    /// A handle was opened.
    case handleOpened(handle: UInt32, protection: ProtectionClass, size: UInt64)
    /// A file's class.
    case protection(ProtectionClass)
    /// One file's attributes.
    case attributes(WireAttributes)
    /// Bytes read through a handle.
    case data(ByteBuffer)
    /// Part of a streamed `read`.
    case dataChunk(ByteBuffer)
    /// End of a streamed answer (`read`, `list`).
    case end
    /// Part of a `list` answer.
    case listChunk([WireAttributes])
    /// Subscribed; the current state to synchronise from.
    case subscribed(StatusReport)
    /// The request failed.
    case error(WireError)
    /// A lock-state event (request id 0).
    case event(WireEvent)
    /// The recovery key `recoveryCreate` made (`WireProtocol.recoveryKeyByteCount` bytes).
    case recoveryKey([UInt8])
    /// What `check` found in the store.
    case checkReport(StoreCheckReport)

    /// The type byte of this response.
    public var type: MessageType {
        switch self {
        case .ok: .ok
        case .helloAccepted: .helloAccepted
        case .status: .statusReport
        case .size: .size
        case .handleOpened: .handleOpened
        case .protection: .protection
        case .attributes: .attributes
        case .data: .data
        case .dataChunk: .dataChunk
        case .end: .end
        case .listChunk: .listChunk
        case .subscribed: .subscribed
        case .error: .error
        case .event: .event
        case .recoveryKey: .recoveryKey
        case .checkReport: .checkReport
        }
    }

    /// The frame for this response to request `requestID`.
    public func frame(requestID: UInt32, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> Frame {
        var body = allocator.buffer(capacity: 32)
        switch self {
        case .ok, .end:
            break
        case .helloAccepted(let version, let maximum, let uid, let gid):
            body.writeInteger(version, endianness: .big)
            body.writeInteger(maximum, endianness: .big)
            body.writeInteger(uid, endianness: .big)
            body.writeInteger(gid, endianness: .big)
        case .status(let report), .subscribed(let report):
            report.encode(into: &body)
        case .size(let size):
            body.writeInteger(size, endianness: .big)
        case .handleOpened(let handle, let protection, let size):
            body.writeInteger(handle, endianness: .big)
            body.writeInteger(protection.rawValue)
            body.writeInteger(size, endianness: .big)
        case .protection(let protection):
            body.writeInteger(protection.rawValue)
        case .attributes(let attributes):
            attributes.encode(into: &body)
        case .data(let data), .dataChunk(let data):
            body.writeWireBuffer(data)
        case .checkReport(let report):
            report.encode(into: &body)
        case .listChunk(let entries):
            body.writeInteger(UInt32(entries.count), endianness: .big)
            for entry in entries { entry.encode(into: &body) }
        case .error(let error):
            body.writeInteger(error.code.rawValue, endianness: .big)
            body.writeWireString(error.message)
            body.writeInteger(error.retryAfterSeconds ?? 0, endianness: .big)
        case .event(let event):
            body.writeInteger(event.kind.rawValue)
            body.writeInteger(event.sequence, endianness: .big)
            body.writeInteger(event.state.wireValue)
            body.writeInteger(event.deadlineUnixMilliseconds, endianness: .big)
            body.writeInteger(UInt8(event.firstUnlock ? 1 : 0))
            body.writeInteger(event.reason?.wireValue ?? 0)
        case .recoveryKey(let key):
            return key.withUnsafeBytes { Self.recoveryKeyFrame(requestID: requestID, key: $0, allocator: allocator) }
        }
        return Frame(type: type.rawValue, requestID: requestID, body: body)
    }

    /// A `recoveryKey` frame holding `key`, copied straight from where the
    /// caller keeps it (guarded memory) into the frame: no other copy.
    public static func recoveryKeyFrame(requestID: UInt32, key: UnsafeRawBufferPointer,
                                        allocator: ByteBufferAllocator = ByteBufferAllocator()) -> Frame {
        var body = allocator.buffer(capacity: key.count)
        body.writeBytes(key)
        return Frame(type: MessageType.recoveryKey.rawValue, requestID: requestID, body: body)
    }

    /// A `data` (or, with `chunk`, `dataChunk`) frame whose content `fill`
    /// writes straight into the frame (at most `capacity` bytes; it returns
    /// how many). The bytes on the wire equal `.data(content).frame(...)`,
    /// without copying the content a second time.
    public static func dataFrame(
        chunk: Bool, requestID: UInt32, capacity: Int, allocator: ByteBufferAllocator = ByteBufferAllocator(),
        fill: (UnsafeMutableRawBufferPointer) throws -> Int
    ) rethrows -> (frame: Frame, count: Int) {
        var body = allocator.buffer(capacity: 4 + capacity)
        body.writeInteger(UInt32(0), endianness: .big)
        let count = try body.writeWithUnsafeMutableBytes(minimumWritableBytes: capacity) { try fill($0) }
        body.setInteger(UInt32(count), at: body.readerIndex, endianness: .big)
        let type: MessageType = chunk ? .dataChunk : .data
        return (Frame(type: type.rawValue, requestID: requestID, body: body), count)
    }

    /// Parses a response or event frame.
    public init(frame: Frame) throws {
        guard let type = MessageType(rawValue: frame.type), type.rawValue >= 0x80 else {
            throw ProtocolViolation("unknown response type 0x\(String(frame.type, radix: 16))")
        }
        var body = frame.wholeBody
        switch type {
        case .ok: self = .ok
        case .end: self = .end
        case .helloAccepted:
            self = .helloAccepted(version: try body.readWireInteger("version"),
                                  maximumFrameLength: try body.readWireInteger("maximum frame length"),
                                  uid: try body.readWireInteger("uid"), gid: try body.readWireInteger("gid"))
        case .statusReport: self = .status(try StatusReport.decode(from: &body))
        case .subscribed: self = .subscribed(try StatusReport.decode(from: &body))
        case .recoveryKey:
            self = .recoveryKey(try body.readWireBytes(count: WireProtocol.recoveryKeyByteCount, "recovery key"))
        case .checkReport: self = .checkReport(try StoreCheckReport.decode(from: &body))
        case .size: self = .size(try body.readWireInteger("size"))
        case .handleOpened:
            self = .handleOpened(handle: try body.readWireInteger("handle"), protection: try body.readWireProtection(),
                                 size: try body.readWireInteger("size"))
        case .protection: self = .protection(try body.readWireProtection())
        case .attributes: self = .attributes(try WireAttributes.decode(from: &body))
        case .data: self = .data(try body.readWireBuffer("data"))
        case .dataChunk: self = .dataChunk(try body.readWireBuffer("data"))
        case .listChunk:
            let count: UInt32 = try body.readWireInteger("entry count")
            var entries: [WireAttributes] = []
            for _ in 0..<count { entries.append(try WireAttributes.decode(from: &body)) }
            self = .listChunk(entries)
        case .error:
            let raw: UInt16 = try body.readWireInteger("error code")
            let message = try body.readWireString("error message")
            let retry: UInt64 = try body.readWireInteger("retry after")
            self = .error(WireError(WireErrorCode(rawValue: raw) ?? .internalError, message,
                                    retryAfterSeconds: retry == 0 ? nil : retry))
        case .event:
            let rawKind: UInt8 = try body.readWireInteger("event kind")
            guard let kind = WireEvent.Kind(rawValue: rawKind) else { throw ProtocolViolation("unknown event kind \(rawKind)") }
            let event = WireEvent(kind: kind, sequence: try body.readWireInteger("sequence"),
                                  state: try body.readWireLockState(),
                                  deadlineUnixMilliseconds: try body.readWireInteger("deadline"),
                                  firstUnlock: try body.readWireBool("first unlock"),
                                  reason: try body.readWireOptionalLockReason())
            // Only the two unavailable events say why.
            guard (event.reason == nil) == (kind == .didBecomeAvailable) else {
                throw ProtocolViolation("a \(kind) event with lock reason \(event.reason?.description ?? "none")")
            }
            self = .event(event)
        default:
            throw ProtocolViolation("unknown response type 0x\(String(frame.type, radix: 16))")
        }
        try body.expectFullyRead(String(describing: type))
    }
}
