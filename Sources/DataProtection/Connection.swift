internal import NIOCore
internal import NIOPosix
internal import ProtectionWire

/// One socket to protd after a successful hello: sends requests through the
/// NIOAsyncChannel writer (safe from many tasks at once); a `RouterHandler`
/// hands every frame to the `RequestRouter` on the event loop, and a reader
/// task waits for the connection to end.
final class Connection: Sendable {
    /// The largest frame this client accepts; the daemon's own limit bounds
    /// what it sends, this only guards against a runaway peer.
    static let clientFrameLimit = 16 * 1024 * 1024

    /// The one event loop (of NIO's shared group) that every connection of
    /// this process uses. Its connections all lead to the same local daemon
    /// and carry little work on this side, so one thread keeps up with them;
    /// sharing it lets that thread take the events of many clients in one
    /// wake-up. Spread over the group's loops, 250 subscribing clients in
    /// one process used a third more CPU and several times the context
    /// switches in `protd-bench --only lock` (docs/DESIGN.md, Client library).
    static let sharedLoop = MultiThreadedEventLoopGroup.singleton.next()

    let router: RequestRouter
    /// The protocol version the daemon chose.
    let protocolVersion: UInt16
    /// The largest content chunk one request may carry.
    let maximumChunkSize: Int
    /// The caller's identity as the daemon sees it.
    let uid: UInt32
    let gid: UInt32

    private let channel: any Channel
    private let outbound: NIOAsyncChannelOutboundWriter<Frame>
    private let reader: Task<Void, Never>

    private init(router: RequestRouter, channel: any Channel, outbound: NIOAsyncChannelOutboundWriter<Frame>,
                 reader: Task<Void, Never>, accepted: HelloAccepted) {
        self.router = router
        self.channel = channel
        self.outbound = outbound
        self.reader = reader
        self.protocolVersion = accepted.version
        self.maximumChunkSize = accepted.maximumChunkSize
        self.uid = accepted.uid
        self.gid = accepted.gid
    }

    deinit {
        // A client dropped without close(): do not leave the socket open.
        router.close(with: .clientClosed("the client was released without close()"))
        channel.close(promise: nil)
    }

    // MARK: Opening

    private struct HelloAccepted {
        var version: UInt16
        var maximumChunkSize: Int
        var uid: UInt32
        var gid: UInt32
    }

    /// Connects to the socket at `path` and says hello; every wait for the
    /// daemon on this connection is bounded by `timeout`.
    static func open(socketPath path: String, clientName: String,
                     timeout: Duration) async throws(DataProtectionError) -> Connection {
        let router = RequestRouter(loop: Connection.sharedLoop, timeout: timeout)
        let asyncChannel: NIOAsyncChannel<Frame, Frame>
        do {
            asyncChannel = try await ClientBootstrap(group: Connection.sharedLoop)
                .connectTimeout(.nanoseconds(Int64(clamping: timeout.components.seconds) &* 1_000_000_000))
                .channelOption(.recvAllocator, value: WireProtocol.receiveBufferAllocator)
                .channelOption(.socketOption(.so_sndbuf), value: WireProtocol.socketBufferBytes)
                .connect(unixDomainSocketPath: path) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            ByteToMessageHandler(FrameDecoder(maximumFrameLength: Connection.clientFrameLimit)))
                        try channel.pipeline.syncOperations.addHandler(FrameWriter())
                        try channel.pipeline.syncOperations.addHandler(RouterHandler(router: router))
                        return try NIOAsyncChannel<Frame, Frame>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw ConnectionFailure.connecting(to: path, error)
        }
        router.attach(asyncChannel.channel)

        var readerTask: Task<Void, Never>?
        let outbound = await withCheckedContinuation { (handOver: CheckedContinuation<NIOAsyncChannelOutboundWriter<Frame>, Never>) in
            readerTask = Task { await Connection.runReader(asyncChannel, router: router, handOver: handOver) }
        }
        guard let reader = readerTask else {
            throw .internalError("the connection's reader task did not start")
        }

        do {
            let accepted = try await hello(clientName: clientName, router: router, outbound: outbound)
            return Connection(router: router, channel: asyncChannel.channel, outbound: outbound, reader: reader,
                              accepted: accepted)
        } catch {
            router.close(with: .daemonUnavailable("the hello to protd failed with a \(error.code) error"))
            try? await asyncChannel.channel.close()
            await reader.value
            // An error the daemon sent (tooManyConnections) says more than
            // what the hello met because of it.
            if let sent = router.failure, sent.code != .daemonUnavailable { throw sent }
            throw error
        }
    }

    private static func hello(clientName: String, router: RequestRouter,
                              outbound: NIOAsyncChannelOutboundWriter<Frame>) async throws(DataProtectionError) -> HelloAccepted {
        let id: UInt32
        do {
            id = try router.register(.single)
        } catch {
            // The daemon refused the connection before the hello went out.
            throw router.failure ?? error
        }
        let request = Request.hello(minimumVersion: WireProtocol.version, maximumVersion: WireProtocol.version,
                                    client: WireText.clientLabel(clientName))
        do {
            try await outbound.write(request.frame(requestID: id))
        } catch {
            router.discard(id)
            if let failure = router.failure { throw failure }
            if Task.isCancelled { throw .cancelled }
            throw .daemonUnavailable("cannot send the hello to protd: \(ConnectionFailure.reason(error))")
        }
        let response = try await router.wait(for: id).get().first
        guard case .helloAccepted(let version, let maximumFrameLength, let uid, let gid) = response else {
            throw response.map { DataProtectionError.unexpected($0, to: "hello") }
                ?? .protocolError("protd answered the hello with nothing")
        }
        guard version == WireProtocol.version else {
            throw .unsupportedVersion("protd chose protocol version \(version); this library speaks \(WireProtocol.version)")
        }
        let chunk = WireProtocol.chunkSize(forFrameLimit: Int(maximumFrameLength))
        guard chunk > 0 else {
            throw .protocolError("protd's frame limit of \(maximumFrameLength) bytes leaves no room for data")
        }
        return HelloAccepted(version: version, maximumChunkSize: chunk, uid: uid, gid: gid)
    }

    /// Waits for the connection to end (frames go to the router on the
    /// event loop, none reach `inbound`), then fails whatever still waits.
    private static func runReader(_ asyncChannel: NIOAsyncChannel<Frame, Frame>, router: RequestRouter,
                                  handOver: CheckedContinuation<NIOAsyncChannelOutboundWriter<Frame>, Never>) async {
        let channel = asyncChannel.channel
        do {
            try await asyncChannel.executeThenClose { inbound, outbound in
                handOver.resume(returning: outbound)
                do {
                    for try await _ in inbound {}
                    router.close(with: .daemonUnavailable("protd closed the connection"))
                } catch let violation as ProtocolViolation where channel.isActive {
                    router.close(with: .protocolError("protd sent a malformed frame: \(violation.message)"))
                } catch {
                    router.close(with: .daemonUnavailable("the connection to protd failed: \(ConnectionFailure.reason(error))"))
                }
            }
        } catch {
            // Closing an already closed channel; nothing left to report.
        }
        router.close(with: .daemonUnavailable("the connection to protd was closed"))
    }

    // MARK: Sending

    /// Sends `request` and returns the slot its answer will arrive in,
    /// within `timeout` (the connection's when nil).
    func submit(_ request: Request, shape: AnswerShape = .single,
                timeout: Duration? = nil) async throws(DataProtectionError) -> PendingAnswer {
        try await submit([request], shape: shape, timeout: timeout)
    }

    /// Sends `requests` under one new request id, in a single write (a small
    /// whole-file write: begin, chunk and end in one system call), and
    /// returns the slot the answer will arrive in. With `due` false the
    /// answer's timeout starts only at `PendingAnswer.startClock()`.
    func submit(_ requests: [Request], shape: AnswerShape = .single,
                timeout: Duration? = nil, due: Bool = true) async throws(DataProtectionError) -> PendingAnswer {
        let id = try router.register(shape, timeout: timeout, due: due)
        let pending = PendingAnswer(requestID: id, router: router)
        try await send(frames: requests.map { $0.frame(requestID: id) })
        return pending
    }

    /// Sends `request` and waits for its whole answer; an `.error` answer is thrown.
    func exchange(_ request: Request, shape: AnswerShape = .single) async throws(DataProtectionError) -> [Response] {
        try await submit(request, shape: shape).frames()
    }

    /// Sends `request` and returns its single answer, within `timeout` (the
    /// connection's when nil); an `.error` answer is thrown.
    func single(_ request: Request, timeout: Duration? = nil) async throws(DataProtectionError) -> Response {
        let frames = try await submit(request, timeout: timeout).frames()
        guard let first = frames.first else { throw .protocolError("protd sent an empty answer") }
        return first
    }

    /// Sends `request` and expects `.ok` within `timeout` (the connection's when nil).
    func expectOK(_ request: Request, _ what: String, timeout: Duration? = nil) async throws(DataProtectionError) {
        let frames = try await submit(request, timeout: timeout).frames()
        guard let response = frames.first else { throw .protocolError("protd sent an empty answer") }
        guard case .ok = response else { throw .unexpected(response, to: what) }
    }

    /// Sends `request` and expects `.size`.
    func expectSize(_ request: Request, _ what: String) async throws(DataProtectionError) -> UInt64 {
        let response = try await single(request)
        guard case .size(let size) = response else { throw .unexpected(response, to: what) }
        return size
    }

    /// Sends one more frame for an existing request id (write chunks, end, abort).
    func send(_ request: Request, requestID: UInt32) async throws(DataProtectionError) {
        try await send(frames: [request.frame(requestID: requestID)])
    }

    /// Completes once the event loop has run everything sent before it
    /// (handed each frame to the socket, or queued it there while the socket
    /// is full).
    func loopBarrier() -> EventLoopFuture<Void> {
        channel.eventLoop.submit {}
    }

    /// Sends frames already built (with their request ids) in a single
    /// write. Waits (suspended) while the socket is full, at most the
    /// connection's timeout: then the connection is closed as stalled.
    func send(frames: [Frame]) async throws(DataProtectionError) {
        if let closed = router.closedError { throw closed }
        let token = router.beginSend()
        defer { router.endSend(token) }
        do {
            try await outbound.write(contentsOf: frames)
        } catch {
            // The send in progress fails with what closed the connection
            // (a stalled daemon's timedOut); later calls with closedError.
            if let failure = router.failure { throw failure }
            if Task.isCancelled { throw .cancelled }
            throw .daemonUnavailable("cannot send to protd: \(ConnectionFailure.reason(error))")
        }
    }

    /// Sends `request` under a new request id whose answer is dropped when
    /// it comes; returns once the frame is queued for the socket.
    func sendIgnoringAnswer(_ request: Request) async throws(DataProtectionError) {
        try await send(request, requestID: try router.untrackedRequestID())
    }

    /// Sends `request` from a task of its own, without waiting even for the
    /// frame to be queued, nor reporting a failure: clean-up that must go
    /// out even when the caller's task is cancelled (a cancelled task's
    /// writes are dropped) or gone (a handle's close on release). Without
    /// `requestID`, its answer is dropped when it comes.
    func sendDetached(_ request: Request, requestID: UInt32? = nil) {
        Task {
            if let requestID {
                try? await send(request, requestID: requestID)
            } else {
                try? await sendIgnoringAnswer(request)
            }
        }
    }

    // MARK: Closing

    /// Closes the socket; waiting and later calls fail with `clientClosed`.
    func close() async {
        router.close(with: .clientClosed("this client's close method was called"))
        outbound.finish()
        try? await channel.close()
        await reader.value
    }
}

/// The answer slot of one sent request. Dropping it unanswered makes the
/// router drop the answer when it comes.
final class PendingAnswer: Sendable {
    /// The request id the answer carries.
    let requestID: UInt32
    private let router: RequestRouter

    init(requestID: UInt32, router: RequestRouter) {
        self.requestID = requestID
        self.router = router
    }

    deinit { router.discard(requestID) }

    /// Starts the answer's timeout (for one submitted as not due yet).
    func startClock() {
        router.startClock(requestID)
    }

    /// The answer's frames; a final `.error` frame is thrown as its error.
    func frames() async throws(DataProtectionError) -> [Response] {
        let frames = try await router.wait(for: requestID).get()
        if case .error(let wire) = frames.last { throw DataProtectionError(wire) }
        return frames
    }

    /// An error answer that already arrived (for streamed writes), else nil.
    func earlyError() -> DataProtectionError? {
        switch router.peek(requestID) {
        case nil: return nil
        case .failure(let error): return error
        case .success(let frames):
            guard let last = frames.last else { return .protocolError("protd sent an empty answer") }
            if case .error(let wire) = last { return DataProtectionError(wire) }
            return .unexpected(last, to: "a write before its end")
        }
    }
}
