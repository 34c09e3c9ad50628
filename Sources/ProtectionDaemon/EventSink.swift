internal import NIOCore
internal import ProtectionWire

/// One subscriber's end of the event hub, in its connection's pipeline
/// between the socket and `FrameWriter`. It writes event frames, already
/// encoded, from the event loop itself, with no task between the hub and
/// the socket. While the socket cannot take more, it keeps the
/// newest `EventHub.bufferSize` frames, so a client that does not read
/// costs a bounded amount and delays no one. Frames wait until `start`,
/// which the connection calls once its `subscribed` answer has gone out.
///
/// Once started it also takes the subscriber's `acknowledge` requests on
/// the event loop, ahead of any earlier request the connection is still
/// serving (PROTOCOL.md section 4.3); they have no answer. Every other
/// frame goes on to the connection.
final class EventSink: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Frame
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?
    private var pending = CircularBuffer<ByteBuffer>(initialCapacity: 4)
    /// Takes an acknowledgement's sequence; set by `start`, so the sink has
    /// started once it is there.
    private var acknowledge: (@Sendable (UInt64) -> Void)?

    /// Makes a sink that holds frames until `start()`.
    init() {}

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        pending.removeAll()
    }

    /// Sends what is waiting, and from now on every frame as it comes;
    /// `acknowledge` takes the subscriber's acknowledgements from now on.
    func start(acknowledge: @escaping @Sendable (UInt64) -> Void) {
        self.acknowledge = acknowledge
        drain()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard let acknowledge, frame.type == MessageType.acknowledge.rawValue, frame.requestID != 0,
              case .acknowledge(let sequence)? = try? Request(frame: frame) else {
            // Malformed ones too: the connection answers them as usual.
            context.fireChannelRead(data)
            return
        }
        acknowledge(sequence)
    }

    /// Writes an answer the connection's task does not write itself (a
    /// lock-and-wait's, when the lock settles); never dropped, whether or
    /// not the connection subscribed.
    func answer(_ frame: Frame) {
        context?.writeAndFlush(wrapOutboundOut(frame.encoded()), promise: nil)
    }

    /// Sends `frames` (encoded) after those waiting; while the socket is
    /// full, keeps only the newest `EventHub.bufferSize`.
    func deliver(_ frames: [ByteBuffer]) {
        for frame in frames {
            if pending.count == EventHub.bufferSize { pending.removeFirst() }
            pending.append(frame)
        }
        drain()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        drain()
        context.fireChannelWritabilityChanged()
    }

    private func drain() {
        guard acknowledge != nil, let context, !pending.isEmpty else { return }
        var wrote = false
        while context.channel.isWritable, let frame = pending.popFirst() {
            context.write(wrapOutboundOut(frame), promise: nil)
            wrote = true
        }
        if wrote { context.flush() }
    }
}

/// The hub's reference to an `EventSink`, to pass between threads; the
/// sink itself is used on its event loop only.
struct EventSinkReference: EventReceiver {
    private let sink: NIOLoopBound<EventSink>

    /// Adds a new sink to `channel`'s pipeline; call on its event loop,
    /// before adding `FrameWriter`, which the sink's bytes do not pass.
    static func install(in channel: any Channel) throws -> EventSinkReference {
        let sink = EventSink()
        try channel.pipeline.syncOperations.addHandler(sink)
        return EventSinkReference(sink: NIOLoopBound(sink, eventLoop: channel.eventLoop))
    }

    private init(sink: NIOLoopBound<EventSink>) { self.sink = sink }

    var eventLoop: any EventLoop { sink.eventLoop }

    func deliver(_ frames: [ByteBuffer]) {
        sink.value.deliver(frames)
    }

    /// Writes `frame` through the sink (see `EventSink.answer`), from any thread.
    func answer(_ frame: Frame) {
        sink.eventLoop.execute { [sink] in sink.value.answer(frame) }
    }

    /// Starts the sink (see `EventSink.start`), from any thread.
    func start(acknowledge: @escaping @Sendable (UInt64) -> Void) {
        sink.eventLoop.execute { [sink] in sink.value.start(acknowledge: acknowledge) }
    }
}
