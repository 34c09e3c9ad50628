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

    @Test("the writer sends a short tail inside the frame's one buffer and a long one uncopied, after the rest")
    func writerSendsTails() throws {
        let channel = EmbeddedChannel(handler: FrameWriter())
        let bytes = (0..<(FrameWriter.copyLimit + 1)).map { UInt8(truncatingIfNeeded: $0 &* 3) }
        let short = Frame(type: 0x08, requestID: 5, body: ByteBuffer(bytes: [0, 0, 0, 9]), tail: ByteBuffer(bytes: bytes.prefix(9)))
        try channel.writeOutbound(short)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == encoded(short))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        // A long tail behind a short body, and behind a long body.
        for bodyBytes in [4, FrameWriter.copyLimit + 1] {
            let long = Frame(type: 0x08, requestID: 6, body: ByteBuffer(repeating: 1, count: bodyBytes),
                             tail: ByteBuffer(bytes: bytes))
            try channel.writeOutbound(long)
            var buffers: [ByteBuffer] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { buffers.append(buffer) }
            #expect(buffers.count == (bodyBytes > FrameWriter.copyLimit ? 3 : 2))
            let sentTail = try #require(buffers.last)
            #expect(sentTail.withUnsafeReadableBytes { $0.baseAddress } == long.tail?.withUnsafeReadableBytes { $0.baseAddress },
                    "the tail was copied")
            var joined = ByteBuffer()
            for var buffer in buffers { joined.writeBuffer(&buffer) }
            #expect(joined == encoded(long))
            #expect(long.wireBodyByteCount == bodyBytes + bytes.count)
        }
        #expect(try channel.finish().isClean)
    }

    @Test("with a copy threshold, the decoder handles frames split and joined at every byte too")
    func verifierCopying() throws {
        let frames = [frame(0x02, 1, []), frame(0x08, 7, Array(0..<200)), frame(0x80, 9, [1, 2, 3]),
                      frame(0x08, 8, (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 5) })]
        let pairs = frames.map { (encoded($0), [$0]) }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) {
            FrameDecoder(maximumFrameLength: 1024, copyThreshold: 100)
        }
    }

    @Test("a body to copy out is copied as it arrives: the receive buffer is left empty, and a frame cut short is an error")
    func partialBodiesAreCopiedAsTheyArrive() throws {
        var decoder = FrameDecoder(maximumFrameLength: 1 << 20, copyThreshold: 1_000)
        let large = frame(0x08, 4, (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 3) })
        let small = frame(0x09, 4, [])
        var wire = encoded(large)
        small.encode(into: &wire)
        let cuts = [3, 9, 700, 2_000, wire.readableBytes]
        var received: [ByteBuffer] = []
        var decoded: [Frame] = []
        var start = 0
        for cut in cuts {
            var piece = ByteBuffer(bytes: Array(wire.readableBytesView)[start..<cut])
            received.append(piece)
            while let frame = try decoder.decode(buffer: &piece) { decoded.append(frame) }
            // Only a frame header too short to read stays behind.
            #expect(piece.readableBytes == (cut == 3 ? 3 : 0), "after \(cut) bytes")
            if piece.readableBytes > 0 {
                start = cut - piece.readableBytes
            } else {
                start = cut
            }
        }
        #expect(decoded == [large, small])
        let body = decoded[0].body.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        for buffer in received {
            let storage = buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress)..<UInt(bitPattern: $0.baseAddress) + UInt($0.count) }
            #expect(!storage.contains(body))
        }
        var cutShort = ByteBuffer(bytes: Array(encoded(large).readableBytesView.prefix(4_000)))
        #expect(try decoder.decode(buffer: &cutShort) == nil)
        #expect(cutShort.readableBytes == 0)
        var nothing = ByteBuffer()
        #expect(throws: ProtocolViolation.self) { try decoder.decodeLast(buffer: &nothing, seenEOF: true) }
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

    @Test("with a copy threshold, a body that long is copied out of the receive buffer; a shorter one stays a slice of it")
    func largeBodiesAreCopiedOut() throws {
        let threshold = 64 * 1024
        var decoder = FrameDecoder(maximumFrameLength: 1 << 20, copyThreshold: threshold)
        let small = Frame(type: 0x81, requestID: 1, body: ByteBuffer(bytes: [1, 2, 3]))
        let large = Frame(type: 0x86, requestID: 2,
                          body: ByteBuffer(bytes: (0..<threshold).map { UInt8(truncatingIfNeeded: $0) }))
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
        .lock(graceMilliseconds: nil, waitUntilLocked: false, reason: .requested),
        .lock(graceMilliseconds: 0, waitUntilLocked: true, reason: .suspend),
        .unlock(passcode: Array("pässcode".utf8)),
        .loginUnlock(uid: 1001, passcode: Array("pässcode".utf8)),
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
        .recoveryCreate(passcode: Array("pässcode".utf8)), .recoveryRemove,
        .recoveryReset(recoveryKey: Array(0..<32), newPasscode: [5]), .check,
    ]

    static let responses: [Response] = [
        .ok, .end,
        .helloAccepted(version: 1, maximumFrameLength: 1 << 20, uid: 1000, gid: 1000),
        .status(StatusReport(state: .locking, passcodeSet: true, failedAttempts: 2, retryAfterSeconds: 0,
                             gracePeriodMilliseconds: 10_000, eventSequence: 9, lockDeadlineUnixMilliseconds: 123,
                             keyMemoryLocked: true, firstUnlockTimeoutMilliseconds: 259_200_000,
                             firstUnlockRemainingMilliseconds: 42)),
        .subscribed(StatusReport(state: .locked, passcodeSet: true, failedAttempts: 0, retryAfterSeconds: 60,
                                 gracePeriodMilliseconds: 0, eventSequence: 1, lockDeadlineUnixMilliseconds: 0,
                                 keyMemoryLocked: false, fault: "the key bag failed authentication")),
        .status(StatusReport(state: .unlocked, passcodeSet: true, failedAttempts: 0, retryAfterSeconds: 0,
                             gracePeriodMilliseconds: 0, eventSequence: 0, lockDeadlineUnixMilliseconds: 0,
                             keyMemoryLocked: true, recoveryKeySet: true)),
        .size(77), .handleOpened(handle: 1, protection: .completeUntilFirstUserAuthentication, size: 5),
        .protection(.complete),
        .attributes(WireAttributes(name: "n", protection: .none, size: 1, modificationTime: -5)),
        .data(ByteBuffer(bytes: [1, 2])), .dataChunk(ByteBuffer(bytes: [3])),
        .listChunk([WireAttributes(name: "a", protection: .complete, size: 0, modificationTime: 1),
                    WireAttributes(name: "b", protection: .none, size: 2, modificationTime: 3)]),
        .error(WireError(.rateLimited, "wait", retryAfterSeconds: 60)),
        .error(WireError(.notFound, "no such file")),
        .event(WireEvent(kind: .willBecomeUnavailable, sequence: 3, state: .locking, deadlineUnixMilliseconds: 99,
                         reason: .requested)),
        .event(WireEvent(kind: .didBecomeUnavailable, sequence: 4, state: .beforeFirstUnlock, reason: .inactivity)),
        .event(WireEvent(kind: .didBecomeAvailable, sequence: 4, state: .unlocked, firstUnlock: true)),
        .recoveryKey(Array(repeating: 0xA5, count: 32)),
        .checkReport(StoreCheckReport(namespaces: 2, files: 9, verifiedFiles: 7, unverifiableFiles: 2, problemCount: 0,
                                     problems: [])),
        .checkReport(StoreCheckReport(namespaces: 1, files: 3, verifiedFiles: 3, unverifiableFiles: 0, problemCount: 5,
                                     problems: [.init(uid: 1000, name: "notes/ä", path: "store/x/files/y", description: "d"),
                                                .init(uid: nil, name: nil, path: "store/junk", description: "e")])),
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

    @Test("requests that carry file content send it as the frame's tail, uncopied, and decode to themselves",
          arguments: [0, 3, 70_000])
    func contentIsTheTail(count: Int) throws {
        let data = ByteBuffer(bytes: (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let address = data.withUnsafeReadableBytes { $0.baseAddress }
        for (request, fields) in [(Request.writeChunk(data), [UInt8]()),
                                  (.handleWrite(handle: 3, offset: 1 << 40, data: data), [0, 0, 0, 3, 0, 0, 1, 0, 0, 0, 0, 0]),
                                  (.handleAppend(handle: 3, data: data), [0, 0, 0, 3])] {
            let frame = request.frame(requestID: 8)
            let tail = try #require(frame.tail, "\(request)")
            #expect(tail.withUnsafeReadableBytes { $0.baseAddress } == address, "\(request): the content was copied")
            #expect(Array(frame.body.readableBytesView) == fields + Self.length(count))
            #expect(try Request(frame: frame) == request)
            // On the wire the tail is the end of the body: decoding the
            // encoded bytes gives the request back.
            var decoder = FrameDecoder(maximumFrameLength: 1 << 20)
            var wire = frame.encoded()
            let decoded = try #require(try decoder.decode(buffer: &wire))
            #expect(decoded.tail == nil && wire.readableBytes == 0)
            #expect(try Request(frame: decoded) == request)
        }
    }

    /// A content length field.
    private static func length(_ count: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt32(count).bigEndian) { Array($0) }
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

    @Test("the round trips cover every request and response type")
    func everyTypeCovered() {
        let requestTypes = Set(MessageType.allCases.filter { $0.rawValue < 0x80 })
        #expect(Set(Self.requests.map(\.type)) == requestTypes)
        #expect(Set(Self.responses.map(\.type)) == Set(MessageType.allCases).subtracting(requestTypes))
    }

    @Test("a recovery key is exactly 32 bytes, the status report's byte 55 says whether one is set")
    func recoveryFields() throws {
        let reset = Request.recoveryReset(recoveryKey: Array(1...32), newPasscode: [7]).frame(requestID: 1)
        #expect(Array(reset.body.readableBytesView) == Array(1...32) + [0, 0, 0, 1, 7])
        #expect(throws: ProtocolViolation.self) {
            try Request(frame: Frame(type: 0x1E, requestID: 1, body: ByteBuffer(bytes: Array(1...31))))
        }
        #expect(throws: ProtocolViolation.self) {
            try Response(frame: Frame(type: 0x8C, requestID: 1, body: ByteBuffer(bytes: Array(0...32))))
        }
        let report = StatusReport(state: .unlocked, passcodeSet: true, failedAttempts: 0, retryAfterSeconds: 0,
                                  gracePeriodMilliseconds: 0, eventSequence: 0, lockDeadlineUnixMilliseconds: 0,
                                  keyMemoryLocked: false, recoveryKeySet: true, fault: "f")
        let body = Array(Response.status(report).frame(requestID: 1).body.readableBytesView)
        #expect(body.count == 56 + 3 && body[38] == 0 && body[39..<55].allSatisfy { $0 == 0 } && body[55] == 1)
    }

    @Test("a check report lists the problems that fit one answer under every frame limit, and counts them all")
    func checkReportFits() throws {
        let path = "store/" + String(repeating: "p", count: 4000)
        let problem = StoreCheckReport.Problem(uid: 0, name: String(repeating: "n", count: 1024), path: path,
                                              description: "a name protd does not make")
        let report = StoreCheckReport(namespaces: 1, files: 0, verifiedFiles: 0, unverifiableFiles: 0,
                                     problemCount: 1000, problems: Array(repeating: problem, count: 1000))
        let fitted = report.fitted()
        #expect(fitted.problems.count > 40 && fitted.problems.count < 1000)
        #expect(fitted.problemCount == 1000)
        let frame = Response.checkReport(fitted).frame(requestID: 1)
        #expect(5 + frame.body.readableBytes <= WireProtocol.minimumFrameLength)
        #expect(try Response(frame: frame) == .checkReport(fitted))
    }

    @Test("a check report listing more problems than it counts, or an unknown uid that is not 0, is a protocol error")
    func malformedCheckReport() throws {
        let counts: [UInt8] = Array(repeating: 0, count: 39) + [1]  // five u64 counts, one problem found
        let problem: [UInt8] = [0, 0, 0, 0, 0] + [0, 0] + [0, 1, 0x61] + [0, 1, 0x62]  // uid unknown, no name, "a", "b"
        #expect(try Response(frame: Frame(type: 0x8D, requestID: 1, body: ByteBuffer(bytes: counts + [0, 0, 0, 1] + problem)))
                == .checkReport(StoreCheckReport(namespaces: 0, files: 0, verifiedFiles: 0, unverifiableFiles: 0,
                                                problemCount: 1, problems: [.init(uid: nil, name: nil, path: "a", description: "b")])))
        #expect(throws: ProtocolViolation.self) {
            try Response(frame: Frame(type: 0x8D, requestID: 1, body: ByteBuffer(bytes: counts + [0, 0, 0, 2] + problem + problem)))
        }
        var unknownUID = problem
        unknownUID[4] = 7
        #expect(throws: ProtocolViolation.self) {
            try Response(frame: Frame(type: 0x8D, requestID: 1, body: ByteBuffer(bytes: counts + [0, 0, 0, 1] + unknownUID)))
        }
    }

    @Test("a lock's reason byte must name a reason: 0 and unknown bytes are protocol errors; 1 to 4 decode")
    func lockReasonBytes() throws {
        for (byte, reason) in [(UInt8(1), LockReason.requested), (2, .inactivity), (3, .suspend), (4, .shutdown)] {
            let frame = Frame(type: 0x03, requestID: 1, body: ByteBuffer(bytes: [2, 0, 0, 0, 0, byte]))
            #expect(try Request(frame: frame) == .lock(graceMilliseconds: nil, waitUntilLocked: true, reason: reason))
        }
        for byte: UInt8 in [0, 5, 0xFF] {
            #expect(throws: ProtocolViolation.self) {
                try Request(frame: Frame(type: 0x03, requestID: 1, body: ByteBuffer(bytes: [0, 0, 0, 0, 0, byte])))
            }
        }
        // A version 2 lock, without the reason byte, is a message cut short.
        #expect(throws: ProtocolViolation.self) {
            try Request(frame: Frame(type: 0x03, requestID: 1, body: ByteBuffer(bytes: [0, 0, 0, 0, 0])))
        }
    }

    @Test("an event carries a reason exactly when it makes data unavailable; an unknown reason byte is a protocol error")
    func eventReasonBytes() throws {
        /// An event body: kind, sequence 1, state unlocked, no deadline, not first, then `reason`.
        func event(kind: UInt8, reason: UInt8) -> Frame {
            Frame(type: 0xC0, requestID: 0, body: ByteBuffer(bytes: [kind] + [0, 0, 0, 0, 0, 0, 0, 1] + [2]
                                                             + [UInt8](repeating: 0, count: 8) + [0, reason]))
        }
        #expect(try Response(frame: event(kind: 2, reason: 3))
                == .event(WireEvent(kind: .didBecomeUnavailable, sequence: 1, state: .unlocked, reason: .suspend)))
        #expect(try Response(frame: event(kind: 3, reason: 0))
                == .event(WireEvent(kind: .didBecomeAvailable, sequence: 1, state: .unlocked)))
        for (kind, reason): (UInt8, UInt8) in [(1, 0), (2, 0), (3, 1), (2, 5)] {
            #expect(throws: ProtocolViolation.self, "kind \(kind), reason \(reason)") { try Response(frame: event(kind: kind, reason: reason)) }
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
