import NIOCore
import NIOEmbedded
import NIOTestUtils
import ProtectionCore
import ProtectionWire
import Testing

@Suite("Frame codec")
struct FrameCodecTests {
    private func encoded(_ frame: Frame) -> ByteBuffer {
        var out = ByteBuffer()
        frame.encode(into: &out)
        return out
    }

    private func frame(_ type: UInt8, _ id: UInt32, _ body: [UInt8]) -> Frame {
        Frame(type: type, requestID: id, body: ByteBuffer(bytes: body))
    }

    @Test("the decoder handles frames split and joined at every byte (ByteToMessageDecoderVerifier)")
    func verifier() throws {
        let frames = [frame(0x02, 1, []), frame(0x08, 7, Array(0..<200)), frame(0x80, 0xFFFF_FFFF, [1])]
        let pairs = frames.map { (encoded($0), [$0]) }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) {
            FrameDecoder(maximumFrameLength: 1024)
        }
    }

    @Test("the writer sends a small frame as one buffer and a large one as its prefix, then its body uncopied")
    func writerSplitsLargeFrames() throws {
        let channel = EmbeddedChannel(handler: FrameWriter())
        let small = frame(0x08, 3, Array(repeating: 7, count: FrameWriter.copyLimit))
        let large = frame(0x08, 4, (0..<(FrameWriter.copyLimit + 1)).map { UInt8(truncatingIfNeeded: $0) })
        try channel.writeOutbound(small)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == encoded(small))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        try channel.writeOutbound(large)
        var joined = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(joined.readableBytes == Frame.prefixByteCount)
        var body = try #require(try channel.readOutbound(as: ByteBuffer.self))
        let bodyAddress = body.withUnsafeReadableBytes { $0.baseAddress }
        #expect(bodyAddress == large.body.withUnsafeReadableBytes { $0.baseAddress }, "the body was copied")
        joined.writeBuffer(&body)
        #expect(joined == encoded(large))
        #expect(try channel.finish().isClean)
    }

    @Test("a frame longer than the limit is refused before its body arrives")
    func oversizedFrame() throws {
        var decoder = FrameDecoder(maximumFrameLength: 100)
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(101), endianness: .big)
        #expect(throws: ProtocolViolation.self) { try decoder.decode(buffer: &buffer) }
    }

    @Test("a length shorter than the frame header is refused")
    func undersizedLength() throws {
        var decoder = FrameDecoder(maximumFrameLength: 100)
        var buffer = ByteBuffer(bytes: [0, 0, 0, 4, 1, 0, 0, 0])
        #expect(throws: ProtocolViolation.self) { try decoder.decode(buffer: &buffer) }
    }

    @Test("with a copy threshold, a data chunk's body is copied out of the receive buffer; a small body stays a slice of it")
    func largeBodiesAreCopiedOut() throws {
        var decoder = FrameDecoder(maximumFrameLength: 1 << 20, copyThreshold: FrameDecoder.chunkCopyThreshold)
        let small = Frame(type: 0x81, requestID: 1, body: ByteBuffer(bytes: [1, 2, 3]))
        let large = Frame(type: 0x86, requestID: 2,
                          body: ByteBuffer(bytes: (0..<FrameDecoder.chunkCopyThreshold).map { UInt8(truncatingIfNeeded: $0) }))
        var received = ByteBuffer()
        small.encode(into: &received)
        large.encode(into: &received)
        let storage = received.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) ..< UInt(bitPattern: $0.baseAddress) + UInt($0.count) }
        func address(_ frame: Frame) -> UInt { frame.body.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } }
        let first = try #require(try decoder.decode(buffer: &received))
        let second = try #require(try decoder.decode(buffer: &received))
        #expect(first == small && second == large)
        #expect(storage.contains(address(first)))
        #expect(!storage.contains(address(second)))
    }

    @Test("without a copy threshold, every body stays a slice of the receive buffer")
    func bodiesAreSlicesByDefault() throws {
        var decoder = FrameDecoder(maximumFrameLength: 1 << 20)
        let large = Frame(type: 0x86, requestID: 2, body: ByteBuffer(repeating: 7, count: 256 * 1024))
        var received = ByteBuffer()
        large.encode(into: &received)
        let storage = received.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) ..< UInt(bitPattern: $0.baseAddress) + UInt($0.count) }
        let frame = try #require(try decoder.decode(buffer: &received))
        #expect(frame == large)
        #expect(storage.contains(frame.body.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }))
    }

    @Test("end of stream inside a frame is a protocol error")
    func truncatedAtEOF() throws {
        var decoder = FrameDecoder(maximumFrameLength: 100)
        var buffer = ByteBuffer(bytes: [0, 0, 0, 9, 2, 0, 0])
        #expect(try decoder.decode(buffer: &buffer) == nil)
        #expect(throws: ProtocolViolation.self) { try decoder.decodeLast(buffer: &buffer, seenEOF: true) }
    }
}

@Suite("Message encoding")
struct MessageCodecTests {
    static let requests: [Request] = [
        .hello(minimumVersion: 1, maximumVersion: 3, client: "tests"),
        .status, .erase, .writeEnd, .writeAbort, .subscribe,
        .lock(graceMilliseconds: nil, waitUntilLocked: false),
        .lock(graceMilliseconds: 0, waitUntilLocked: true),
        .unlock(passcode: Array("pässcode".utf8)),
        .passwd(old: nil, new: [1, 2]), .passwd(old: [3], new: [4]),
        .writeBegin(name: "a/b", protection: .completeUnlessOpen, durable: true),
        .writeChunk(ByteBuffer(bytes: [9, 8, 7])),
        .read(name: "x", offset: 5, length: WireProtocol.toEnd),
        .open(name: "h", mode: .openOrCreate, protection: .complete),
        .handleRead(handle: 3, offset: 1 << 40, length: 65536),
        .handleWrite(handle: 3, offset: 2, data: ByteBuffer(bytes: [1])),
        .handleAppend(handle: 4, data: ByteBuffer()),
        .handleTruncate(handle: 5, size: 0), .handleSize(handle: 6), .handleSync(handle: 7), .handleClose(handle: 8),
        .getProtection(name: "g"), .setProtection(name: "s", protection: .none), .list(prefix: ""),
        .stat(name: "st"), .delete(name: "d"), .acknowledge(sequence: 42),
    ]

    static let responses: [Response] = [
        .ok, .end,
        .helloAccepted(version: 1, maximumFrameLength: 1 << 20, uid: 1000, gid: 1000),
        .status(StatusReport(state: .locking, passcodeSet: true, failedAttempts: 2, retryAfterSeconds: 0,
                             gracePeriodMilliseconds: 10_000, eventSequence: 9, lockDeadlineUnixMilliseconds: 123)),
        .subscribed(StatusReport(state: .locked, passcodeSet: true, failedAttempts: 0, retryAfterSeconds: 60,
                                 gracePeriodMilliseconds: 0, eventSequence: 1, lockDeadlineUnixMilliseconds: 0)),
        .size(77), .handleOpened(handle: 1, protection: .completeUntilFirstUserAuthentication, size: 5),
        .protection(.complete),
        .attributes(WireAttributes(name: "n", protection: .none, size: 1, modificationTime: -5)),
        .data(ByteBuffer(bytes: [1, 2])), .dataChunk(ByteBuffer(bytes: [3])),
        .listChunk([WireAttributes(name: "a", protection: .complete, size: 0, modificationTime: 1),
                    WireAttributes(name: "b", protection: .none, size: 2, modificationTime: 3)]),
        .error(WireError(.rateLimited, "wait", retryAfterSeconds: 60)),
        .error(WireError(.notFound, "no such file")),
        .event(WireEvent(kind: .willBecomeUnavailable, sequence: 3, state: .locking, deadlineUnixMilliseconds: 99)),
        .event(WireEvent(kind: .didBecomeAvailable, sequence: 4, state: .unlocked, firstUnlock: true)),
    ]

    @Test("every request survives encode and decode", arguments: requests)
    func requestRoundTrip(request: Request) throws {
        let frame = request.frame(requestID: 17)
        #expect(frame.requestID == 17)
        #expect(try Request(frame: frame) == request)
    }

    @Test("every response survives encode and decode", arguments: responses)
    func responseRoundTrip(response: Response) throws {
        #expect(try Response(frame: response.frame(requestID: 3)) == response)
    }

    @Test("a write chunk frame built from bytes is the frame of writeChunk with them", arguments: [0, 3, 70_000])
    func writeChunkFrame(count: Int) throws {
        let content = Array(0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var body = ByteBuffer(bytes: [1, 2, 3, 4, 5])
        let frame = Request.writeChunkFrame(content[...], requestID: 12, into: &body)
        #expect(frame == Request.writeChunk(ByteBuffer(bytes: content)).frame(requestID: 12))
        #expect(try Request(frame: frame) == .writeChunk(ByteBuffer(bytes: content)))
    }

    @Test("a write chunk frame's copy lands a whole number of cache lines from its source, wherever that lies")
    func writeChunkFrameAlignment() throws {
        let content = Array(0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        var body = ByteBuffer()
        for start in 0..<(2 * Request.copyAlignment + 3) {
            let slice = content[start..<(start + 8_192)]
            let frame = Request.writeChunkFrame(slice, requestID: 5, into: &body)
            let expected = Request.writeChunk(ByteBuffer(bytes: slice)).frame(requestID: 5)
            #expect(frame.encoded() == expected.encoded(), "slice from \(start)")
            #expect(try Request(frame: frame) == .writeChunk(ByteBuffer(bytes: slice)))
            let source = slice.withUnsafeBytes { Int(bitPattern: $0.baseAddress) }
            #expect((Self.contentAddress(in: frame, at: 4) &- source) % Request.copyAlignment == 0, "slice from \(start)")
        }
    }

    @Test("so does the content of every request that carries some, built from a buffer")
    func contentFrameAlignment() throws {
        let bytes = Array(0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* 11) }
        for start in 0..<(2 * Request.copyAlignment + 3) {
            var data = ByteBuffer(bytes: bytes)
            data.moveReaderIndex(forwardBy: start)
            let source = data.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) }
            for (request, offset) in [(Request.writeChunk(data), 4), (.handleWrite(handle: 3, offset: 99, data: data), 16),
                                      (.handleAppend(handle: 3, data: data), 8)] {
                let frame = request.frame(requestID: 8)
                #expect(try Request(frame: frame) == request, "\(request) from \(start)")
                #expect(frame.body.getBytes(at: frame.body.readerIndex + offset, length: data.readableBytes)
                    == Array(bytes[start...]), "\(request) from \(start)")
                #expect((Self.contentAddress(in: frame, at: offset) &- source) % Request.copyAlignment == 0,
                        "\(request) from \(start)")
            }
        }
    }

    @Test("handle writes and appends built from bytes are the frames of the requests, aligned the same way")
    func handleContentFrames() throws {
        let bytes = Array(0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* 17) }
        for start in 0..<(2 * Request.copyAlignment + 3) {
            let slice = bytes[start..<(start + 8_000)]
            let source = slice.withUnsafeBytes { Int(bitPattern: $0.baseAddress) }
            let built = [(Request.handleWriteFrame(handle: 7, offset: 1 << 40, content: slice, requestID: 4),
                          Request.handleWrite(handle: 7, offset: 1 << 40, data: ByteBuffer(bytes: slice)), 16),
                         (Request.handleAppendFrame(handle: 7, content: slice, requestID: 4),
                          Request.handleAppend(handle: 7, data: ByteBuffer(bytes: slice)), 8)]
            for (frame, request, offset) in built {
                #expect(frame.encoded() == request.frame(requestID: 4).encoded(), "\(request) from \(start)")
                #expect(try Request(frame: frame) == request)
                #expect((Self.contentAddress(in: frame, at: offset) &- source) % Request.copyAlignment == 0,
                        "\(request) from \(start)")
            }
        }
    }

    /// The address of the byte `offset` bytes into `frame`'s body.
    private static func contentAddress(in frame: Frame, at offset: Int) -> Int {
        frame.body.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) } + offset
    }

    @Test("a data frame filled in place has the same bytes as one built from a buffer", arguments: [false, true])
    func dataFrameInPlace(chunk: Bool) throws {
        let content: [UInt8] = Array(0..<200).map { UInt8($0) }
        let (frame, count) = Response.dataFrame(chunk: chunk, requestID: 9, capacity: 256) { buffer in
            buffer.copyBytes(from: content)
            return content.count
        }
        #expect(count == content.count)
        let expected = (chunk ? Response.dataChunk(ByteBuffer(bytes: content)) : .data(ByteBuffer(bytes: content)))
            .frame(requestID: 9)
        #expect(frame == expected)
        #expect(try Response(frame: frame) == (chunk ? .dataChunk(ByteBuffer(bytes: content)) : .data(ByteBuffer(bytes: content))))
    }

    @Test("unknown types, missing fields and trailing bytes are protocol errors")
    func malformedBodies() {
        #expect(throws: ProtocolViolation.self) { try Request(frame: Frame(type: 0x7F, requestID: 1, body: ByteBuffer())) }
        #expect(throws: ProtocolViolation.self) { try Request(frame: Frame(type: 0x80, requestID: 1, body: ByteBuffer())) }
        #expect(throws: ProtocolViolation.self) { try Request(frame: Frame(type: 0x16, requestID: 1, body: ByteBuffer(bytes: [0, 5, 65]))) }
        #expect(throws: ProtocolViolation.self) { try Request(frame: Frame(type: 0x02, requestID: 1, body: ByteBuffer(bytes: [0]))) }
        #expect(throws: ProtocolViolation.self) {
            try Request(frame: Frame(type: 0x13, requestID: 1, body: ByteBuffer(bytes: [0, 1, 65, 9])))
        }
        #expect(throws: ProtocolViolation.self) {
            try Request(frame: Frame(type: 0x16, requestID: 1, body: ByteBuffer(bytes: [0, 2, 0xFF, 0xFE])))
        }
    }

    @Test("an unknown error code decodes as internalError instead of failing")
    func unknownErrorCode() throws {
        var body = ByteBuffer()
        body.writeInteger(UInt16(999), endianness: .big)
        body.writeInteger(UInt16(0), endianness: .big)
        body.writeInteger(UInt64(0), endianness: .big)
        #expect(try Response(frame: Frame(type: 0x8F, requestID: 1, body: body)) == .error(WireError(.internalError, "")))
    }
}
