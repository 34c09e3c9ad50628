import NIOCore
import NIOPosix
@testable import ProtectionDaemon
import ProtectionCore
import ProtectionWire

/// A receiver whose frames arrive, decoded, on an unbounded stream, for
/// tests of the hub and the lock controller without sockets. A buffer that
/// is not one whole frame ends the stream.
struct StreamReceiver: EventReceiver {
    let continuation: AsyncStream<Frame>.Continuation
    let eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()

    func deliver(_ frames: [ByteBuffer]) {
        for bytes in frames {
            guard let frame = Frame(wholeFrame: bytes) else {
                continuation.finish()
                return
            }
            continuation.yield(frame)
        }
    }
}

extension Frame {
    /// The frame `bytes` hold (an event sink's output), or nil unless they
    /// are exactly one whole frame.
    init?(wholeFrame bytes: ByteBuffer) {
        var bytes = bytes
        var decoder = FrameDecoder(maximumFrameLength: .max)
        guard let frame = try? decoder.decode(buffer: &bytes), bytes.readableBytes == 0 else { return nil }
        self = frame
    }
}

extension EventHub {
    /// Registers a subscriber whose frames arrive on the returned stream.
    func subscribe() -> (SubscriberID, AsyncStream<Frame>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Frame.self)
        return (subscribe(StreamReceiver(continuation: continuation)), stream)
    }
}
