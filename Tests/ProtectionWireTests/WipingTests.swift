import NIOCore
import NIOEmbedded
import ProtectionWire
import Testing

/// The daemon's decoder and writer leave no content or passcode in the
/// buffers they were given.
@Suite("Wiping received and sent bytes")
struct WipingTests {
    private static let frames = [
        Frame(type: 0x02, requestID: 1, body: ByteBuffer()),
        Request.unlock(passcode: Array("a passcode".utf8)).frame(requestID: 2),
        Frame(type: 0x08, requestID: 3, body: ByteBuffer(bytes: (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) })),
    ]

    /// The frames back to back, as a client sends them.
    private static var stream: [UInt8] {
        var wire = ByteBuffer()
        for frame in frames { frame.encode(into: &wire) }
        return Array(wire.readableBytesView)
    }

    @Test("the wiping decoder gives the same frames whatever the reads, takes every byte and zeroes it",
          arguments: [1, 2, 5, 8, 9, 10, 64, 400])
    func decoderTakesAndZeroesEveryByte(readSize: Int) throws {
        var decoder = FrameDecoder.wiping(maximumFrameLength: 1024)
        var decoded: [Frame] = []
        let stream = Self.stream
        for start in stride(from: 0, to: stream.count, by: readSize) {
            var read = ByteBuffer(bytes: stream[start..<min(start + readSize, stream.count)])
            let whole = read
            while let frame = try decoder.decode(buffer: &read) { decoded.append(frame) }
            #expect(read.readableBytes == 0, "bytes left behind for NIO to append the next read to")
            #expect(whole.readableBytesView.allSatisfy { $0 == 0 }, "a read was not zeroed")
        }
        var end = ByteBuffer()
        #expect(try decoder.decodeLast(buffer: &end, seenEOF: true) == nil)
        #expect(decoded == Self.frames)
    }

    @Test("the wiping decoder refuses a bad length as soon as it is whole, and a stream cut inside a prefix")
    func decoderRefusesEarly() throws {
        var decoder = FrameDecoder.wiping(maximumFrameLength: 100)
        var first = ByteBuffer(bytes: [0, 0])
        #expect(try decoder.decode(buffer: &first) == nil)
        var second = ByteBuffer(bytes: [1, 0])
        #expect(throws: ProtocolViolation.self) { try decoder.decode(buffer: &second) }

        var cut = FrameDecoder.wiping(maximumFrameLength: 100)
        var prefix = ByteBuffer(bytes: [0, 0, 0, 9, 2])
        #expect(try cut.decode(buffer: &prefix) == nil)
        var nothing = ByteBuffer()
        #expect(throws: ProtocolViolation.self) { try cut.decodeLast(buffer: &nothing, seenEOF: true) }
    }

    @Test("the daemon's writer zeroes a data frame once it is written, after sending it whole; other frames stay")
    func writerZeroesSentContent() throws {
        let recorder = SentBytes()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers(recorder, FrameWriter(wipesContent: true))
        let content = (0..<(FrameWriter.copyLimit + 100)).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ 1) }
        for count in [10, content.count] {
            let data = Response.dataChunk(ByteBuffer(bytes: content.prefix(count))).frame(requestID: 4)
            let status = Response.size(7).frame(requestID: 5)
            let expected = Array(data.encoded().readableBytesView) + Array(status.encoded().readableBytesView)
            try channel.writeOutbound(data)
            try channel.writeOutbound(status)
            let sentWhole = recorder.bytes == expected
            #expect(sentWhole, "\(count) bytes: not what was sent")
            #expect(data.body.readableBytesView.allSatisfy { $0 == 0 }, "\(count) bytes: the frame was not zeroed")
            var buffers: [ByteBuffer] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { buffers.append(buffer) }
            #expect(buffers.dropLast().allSatisfy { buffer in buffer.readableBytesView.allSatisfy { $0 == 0 } },
                    "\(count) bytes: a buffer sent was not zeroed")
            #expect(buffers.last == status.encoded(), "\(count) bytes: a frame without content was changed")
            recorder.bytes = []
        }
        #expect(try channel.finish().isClean)
    }

    @Test("wiping a request zeroes its passcodes in the storage its copies share")
    func passcodesAreWipedInPlace() throws {
        let request = try Request(frame: Request.passwd(old: Array("old one".utf8), new: Array("new one".utf8))
            .frame(requestID: 1))
        let copy = request
        request.wipePasscodes()
        guard case .passwd(let old, let new) = copy else { Issue.record("not a passwd: \(copy)"); return }
        #expect(old == [UInt8](repeating: 0, count: 7) && new == [UInt8](repeating: 0, count: 7))
    }
}

/// Copies every buffer written past it, as the socket would take it then.
private final class SentBytes: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    var bytes: [UInt8] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        bytes += unwrapOutboundIn(data).readableBytesView
        context.write(data, promise: promise)
    }
}
