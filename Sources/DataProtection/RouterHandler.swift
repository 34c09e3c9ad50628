internal import NIOCore
internal import ProtectionWire

/// Hands every frame from the daemon to the `RequestRouter` on the event
/// loop as soon as it is decoded, so an answer or event reaches the task
/// waiting for it without first waking a reader task, and sends the
/// acknowledgements event observers ask for from here, without a hop.
/// Frames are not passed on; errors and the end of the connection are.
final class RouterHandler: ChannelInboundHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Frame
    typealias OutboundOut = Frame

    private let router: RequestRouter
    /// Set once the router asked to close: later frames are dropped.
    private var closing = false

    init(router: RequestRouter) {
        self.router = router
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        switch router.receive(unwrapInboundIn(data)) {
        case .keepReading:
            break
        case .closeConnection:
            closing = true
            context.close(promise: nil)
        case .acknowledge(let sequence, let requestID):
            let frame = Request.acknowledge(sequence: sequence).frame(requestID: requestID)
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        }
    }
}
