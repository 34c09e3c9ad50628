import NIOCore
import NIOPosix
@testable import ProtectionDaemon
import ProtectionCore
import ProtectionWire

/// A receiver whose frames arrive on an unbounded stream, for tests of the
/// hub and the lock controller without sockets.
struct StreamReceiver: EventReceiver {
    let continuation: AsyncStream<Frame>.Continuation
    let eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()

    func deliver(_ frames: [Frame]) {
        for frame in frames { continuation.yield(frame) }
    }
}

extension EventHub {
    /// Registers a subscriber whose frames arrive on the returned stream.
    func subscribe() -> (SubscriberID, AsyncStream<Frame>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Frame.self)
        return (subscribe(StreamReceiver(continuation: continuation)), stream)
    }
}
