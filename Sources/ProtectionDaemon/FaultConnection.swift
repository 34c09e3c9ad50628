internal import Logging
internal import NIOCore
internal import ProtectionWire

/// Serves one client while the daemon is in a fault state (`DaemonFault`):
/// the hello, `status` with the fault, and for every other request an
/// error that names it. Holds nothing, so there is nothing to release.
struct FaultConnection {
    let peer: PeerCredentials
    let context: FaultContext
    let outbound: NIOAsyncChannelOutboundWriter<Frame>

    /// Runs until the client disconnects or breaks the protocol.
    func run(inbound: NIOAsyncChannelInboundStream<Frame>) async {
        do {
            var frames = inbound.makeAsyncIterator()
            guard let first = try await frames.next() else { return }
            let (answer, accepted) = try Connection.answerHello(first, peer: peer,
                                                                maximumFrameLength: context.maximumFrameLength)
            try await outbound.write(answer.frame(requestID: first.requestID))
            guard accepted else { return }
            while let frame = try await frames.next() {
                let answer: Response?
                do {
                    // Refused content and passcodes are zeroed too, before the answer (docs/SECURITY.md).
                    defer { frame.wipeContent() }
                    guard frame.requestID != 0 else { throw ProtocolViolation("request id 0 is reserved for events") }
                    let request = try Request(frame: frame)
                    defer { request.wipePasscodes() }
                    answer = switch request {
                    case .status: .status(context.statusReport)
                    // A streamed write's begin got the refusal; its rest is ignored.
                    case .writeChunk, .writeEnd, .writeAbort: nil
                    default: .error(context.fault.refusal)
                    }
                }
                if let answer { try await outbound.write(answer.frame(requestID: frame.requestID)) }
            }
        } catch let violation as ProtocolViolation {
            try? await outbound.write(Response.error(WireError(.protocolError, violation.message)).frame(requestID: 0))
        } catch {
            context.logger.debug("connection ended", metadata: ["protd.error": "\(error)"])
        }
    }
}
