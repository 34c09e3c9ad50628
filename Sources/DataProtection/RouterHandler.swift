internal import NIOCore
internal import ProtectionWire

/// Hands every frame from the daemon to the `RequestRouter` on the event
/// loop as soon as it is decoded, so an answer or event reaches the task
/// waiting for it without first waking a reader task. Frames are not passed
/// on; errors and the end of the connection are.
final class RouterHandler: ChannelInboundHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Frame

    private let router: RequestRouter
    /// Set once the router asked to close: later frames are dropped.
    private var closing = false

    init(router: RequestRouter) {
        self.router = router
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        if router.receive(unwrapInboundIn(data)) == .closeConnection {
            closing = true
            context.close(promise: nil)
        }
    }
}
