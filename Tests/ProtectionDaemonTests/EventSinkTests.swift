import NIOCore
import NIOEmbedded
@testable import ProtectionDaemon
import ProtectionWire
import Synchronization
import Testing

/// The sink in a real (embedded) pipeline: it holds events until the
/// subscription's answer is out, then writes them from the event loop, and
/// keeps only the newest while the socket is full.
@Suite("Event sink")
struct EventSinkTests {
    private static func frame(_ sequence: UInt64) -> Frame {
        Response.event(WireEvent(EventHubTests.event(sequence))).frame(requestID: 0)
    }

    /// The sequences of the event frames the sink wrote, each a buffer
    /// holding one whole encoded frame.
    private static func written(_ channel: EmbeddedChannel) throws -> [UInt64] {
        var sequences: [UInt64] = []
        while let bytes = try channel.readOutbound(as: ByteBuffer.self) {
            sequences.append(try EventHubTests.sequence(of: Frame(wholeFrame: bytes)))
        }
        return sequences
    }

    @Test("frames wait until start, then go out in order, and later ones go out at once")
    func holdsUntilStarted() throws {
        let sink = EventSink()
        let channel = EmbeddedChannel(handler: sink)
        sink.deliver([Self.frame(1).encoded(), Self.frame(2).encoded()])
        #expect(try Self.written(channel) == [])
        sink.start { _ in }
        #expect(try Self.written(channel) == [1, 2])
        sink.deliver([Self.frame(3).encoded()])
        #expect(try Self.written(channel) == [3])
        #expect(try channel.finish().isClean)
    }

    @Test("while the socket is full the sink keeps only the newest frames, and sends them when it drains")
    func keepsNewestWhileUnwritable() throws {
        let sink = EventSink()
        let channel = EmbeddedChannel(handler: sink)
        sink.start { _ in }
        channel.isWritable = false
        let total = UInt64(EventHub.bufferSize * 3)
        for sequence in 1...total { sink.deliver([Self.frame(sequence).encoded()]) }
        #expect(try Self.written(channel) == [])
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(try Self.written(channel) == Array((total - UInt64(EventHub.bufferSize) + 1)...total))
        #expect(try channel.finish().isClean)
    }

    @Test("once started, acknowledgements are taken on the loop without an answer; other frames go on")
    func takesAcknowledgements() throws {
        let sink = EventSink()
        let channel = EmbeddedChannel(handler: sink)
        let early = Request.acknowledge(sequence: 1).frame(requestID: 3)
        try channel.writeInbound(early)
        #expect(try channel.readInbound(as: Frame.self) == early)
        let taken = Mutex<[UInt64]>([])
        sink.start { sequence in taken.withLock { $0.append(sequence) } }
        try channel.writeInbound(Request.acknowledge(sequence: 7).frame(requestID: 4))
        #expect(taken.withLock { $0 } == [7])
        #expect(try channel.readInbound(as: Frame.self) == nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        let status = Request.status.frame(requestID: 5)
        try channel.writeInbound(status)
        #expect(try channel.readInbound(as: Frame.self) == status)
        var malformed = Request.acknowledge(sequence: 8).frame(requestID: 6)
        malformed.body.moveWriterIndex(to: malformed.body.writerIndex - 1)
        try channel.writeInbound(malformed)
        #expect(try channel.readInbound(as: Frame.self) == malformed)
        #expect(taken.withLock { $0 } == [7])
        #expect(try channel.finish().isClean)
    }

    @Test("an answer goes out at once, subscribed or not, and is not held back like events")
    func answersGoOutAtOnce() throws {
        let sink = EventSink()
        let channel = EmbeddedChannel(handler: sink)
        sink.deliver([Self.frame(1).encoded()])
        let answer = Response.ok.frame(requestID: 9)
        sink.answer(answer)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == answer.encoded())
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(try channel.finish().isClean)
    }

    @Test("the hub's reference delivers through the sink's event loop")
    func referenceDeliversOnTheLoop() throws {
        let channel = EmbeddedChannel()
        let reference = try EventSinkReference.install(in: channel)
        let hub = EventHub()
        _ = hub.subscribe(reference)
        hub.broadcast([EventHubTests.event(5)])
        reference.start { _ in }
        channel.embeddedEventLoop.run()
        #expect(try Self.written(channel) == [5])
        #expect(try channel.finish().isClean)
    }
}
