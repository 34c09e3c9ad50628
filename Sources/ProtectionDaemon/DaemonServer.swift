internal import Glibc
internal import Logging
internal import NIOCore
internal import NIOPosix
internal import ProtectionWire
public import ServiceLifecycle

/// The Unix-socket server: accepts connections, learns each peer's
/// credentials, and serves each connection in its own child task. On
/// graceful shutdown it stops accepting, runs `beforeClosing`, and closes
/// every connection.
public final class DaemonServer: Service {
    /// Where connections come from.
    public enum Listener: Sendable {
        /// Bind a new socket at this path (mode and group applied after).
        case path(String, mode: UInt32, group: String?)
        /// A listening socket passed by systemd socket activation.
        case inherited(fd: Int32)
    }

    /// Requests waiting for a connection's task: reading from the socket
    /// pauses once 4 decoded frames wait (NIO's default is 10) until 2 are
    /// left, though every frame of the read that crossed the mark is still
    /// decoded (one read is at most 1 MiB). A streamed write then waits in
    /// the daemon with a few chunks of 512 KiB instead of 10.
    static let channelConfiguration = NIOAsyncChannel<Frame, Frame>.Configuration(
        backPressureStrategy: .init(lowWatermark: 2, highWatermark: 4))

    /// Who answers the connections.
    private enum Backend: Sendable {
        /// The store: the normal case.
        case store(ConnectionContext)
        /// Nothing but `status` and the fault (`DaemonFault`).
        case fault(FaultContext)
    }

    private let listener: Listener
    private let backend: Backend
    private let maximumFrameLength: Int
    private let authorization: Authorization
    private let logger: Logger
    private let registry: ConnectionRegistry
    private let onReady: @Sendable () -> Void

    private let onStopping: @Sendable () -> Void
    private let beforeClosing: @Sendable () async -> Void

    /// Makes a server; `onReady` runs once it accepts connections,
    /// `onStopping` when a graceful shutdown begins, `beforeClosing` once
    /// it no longer accepts and before it closes the connections.
    public convenience init(listener: Listener, context: ConnectionContext,
                            onReady: @escaping @Sendable () -> Void = {},
                            onStopping: @escaping @Sendable () -> Void = {},
                            beforeClosing: @escaping @Sendable () async -> Void = {}) {
        self.init(listener: listener, limits: context.limits, backend: .store(context),
                  maximumFrameLength: context.maximumFrameLength, authorization: context.authorization,
                  logger: context.logger, onReady: onReady, onStopping: onStopping, beforeClosing: beforeClosing)
    }

    /// Makes a server for a daemon in a fault state: it answers `status`
    /// with the fault and refuses everything else (`DaemonFault`).
    public convenience init(listener: Listener, limits: ClientLimits, fault: FaultContext,
                            onReady: @escaping @Sendable () -> Void = {},
                            onStopping: @escaping @Sendable () -> Void = {}) {
        self.init(listener: listener, limits: limits, backend: .fault(fault),
                  maximumFrameLength: fault.maximumFrameLength, authorization: fault.authorization,
                  logger: fault.logger, onReady: onReady, onStopping: onStopping, beforeClosing: {})
    }

    private init(listener: Listener, limits: ClientLimits, backend: Backend, maximumFrameLength: Int,
                 authorization: Authorization, logger: Logger, onReady: @escaping @Sendable () -> Void,
                 onStopping: @escaping @Sendable () -> Void, beforeClosing: @escaping @Sendable () async -> Void) {
        self.listener = listener
        self.registry = ConnectionRegistry(limits: limits)
        self.backend = backend
        self.maximumFrameLength = maximumFrameLength
        self.authorization = authorization
        self.logger = logger
        self.onReady = onReady
        self.onStopping = onStopping
        self.beforeClosing = beforeClosing
    }

    public func run() async throws {
        let maximumFrameLength = maximumFrameLength
        let initializer: @Sendable (any Channel) -> EventLoopFuture<AcceptedConnection> = { channel in
            PeerCredentials.read(from: channel).flatMapThrowing { peer in
                try channel.pipeline.syncOperations.addHandler(
                    ByteToMessageHandler(FrameDecoder.wiping(maximumFrameLength: maximumFrameLength)))
                let events = try EventSinkReference.install(in: channel)
                try channel.pipeline.syncOperations.addHandler(FrameWriter(wipesContent: true))
                return AcceptedConnection(peer: peer, events: events,
                                          channel: try NIOAsyncChannel(wrappingChannelSynchronously: channel,
                                                                       configuration: Self.channelConfiguration))
            }
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.recvAllocator, value: WireProtocol.receiveBufferAllocator)
            // One read (of up to 1 MiB) per wake-up: NIO's default of four let
            // a streamed write's chunks pile up past the inbound queue's limit
            // before it paused reading (docs/DESIGN.md, Memory).
            .childChannelOption(.maxMessagesPerRead, value: 1)
            .childChannelOption(.socketOption(.so_sndbuf), value: WireProtocol.socketBufferBytes)
        let server: NIOAsyncChannel<AcceptedConnection, Never>
        switch listener {
        case .path(let path, let mode, let group):
            try ListeningSocket.prepare(path: path)
            // Owner-only until its mode and group are set: a client that
            // connected in between would keep its connection.
            let previousMask = umask(0o177)
            do {
                defer { umask(previousMask) }
                server = try await bootstrap.bind(unixDomainSocketPath: path, childChannelInitializer: initializer)
            } catch let error as IOError {
                throw DaemonStartupError("cannot listen on \(path): \(String(cString: strerror(error.errnoCode)))")
            }
            do {
                try ListeningSocket.applyPermissions(path: path, mode: mode, group: group)
            } catch {
                try? await server.channel.close()
                ListeningSocket.remove(path: path)
                throw error
            }
            logger.notice("serving", metadata: ["protd.socket": "\(path)"])
        case .inherited(let fd):
            server = try await bootstrap.bind(fd, childChannelInitializer: initializer)
            logger.notice("serving on a socket passed by systemd", metadata: ["protd.socket.fd": "\(fd)"])
        }
        onReady()
        let registry = registry
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await accepted in inbound {
                        group.addTask { await self.serve(accepted) }
                    }
                }
                // No longer accepting (a graceful shutdown closed the listener).
                await beforeClosing()
                registry.closeAll()
            }
        } onGracefulShutdown: { [onStopping] in
            onStopping()
            server.channel.close(promise: nil)
        }
        if case .path(let path, _, _) = listener { ListeningSocket.remove(path: path) }
        logger.notice("stopped serving")
    }

    private func serve(_ accepted: AcceptedConnection) async {
        let (connection, peer) = (accepted.channel, accepted.peer)
        // Administrators get a kept slot when they have no ordinary one,
        // so that clients holding every ordinary slot cannot keep them from
        // locking (`ConnectionSlots`).
        let slot: ConnectionSlots.Slot
        switch registry.add(connection.channel, uid: peer.uid, isAdmin: authorization.isAdmin(peer)) {
        case .admitted(let admitted):
            slot = admitted
        case .closing:
            try? await connection.channel.close()
            return
        case .full(let refusal):
            logger.warning("connection refused: too many connections",
                           metadata: ["protd.peer.uid": "\(peer.uid)", "protd.error": "\(refusal.message)"])
            try? await connection.executeThenClose { [registry] inbound, outbound in
                try await outbound.write(Response.error(refusal).frame(requestID: 0))
                // Close once the client's hello came (at most 1 s): closed at
                // once, the hello could meet a broken pipe before the client
                // read this answer, and it would report the daemon as
                // unreachable instead. Only a few wait so at a time.
                let channel = connection.channel
                guard registry.holdRefused(channel) else { return }
                defer { registry.releaseRefused(channel) }
                let timeout = channel.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
                defer { timeout.cancel() }
                for try await _ in inbound { break }
            }
            return
        }
        defer { registry.remove(connection.channel) }
        do {
            try await connection.executeThenClose { [backend] inbound, outbound in
                switch backend {
                case .store(let context):
                    await Connection(peer: peer, context: context, outbound: outbound, events: accepted.events,
                                     slot: slot).run(inbound: inbound)
                case .fault(let context):
                    await FaultConnection(peer: peer, context: context, outbound: outbound).run(inbound: inbound)
                }
            }
        } catch {
            logger.debug("connection closed with an error", metadata: ["protd.error": "\(error)"])
        }
    }
}

/// A connection as the server's channel initializer hands it over.
private struct AcceptedConnection: Sendable {
    /// Who is on the other end.
    let peer: PeerCredentials
    /// The connection's event sink, for a subscription.
    let events: EventSinkReference
    /// Frames in and out.
    let channel: NIOAsyncChannel<Frame, Frame>
}
