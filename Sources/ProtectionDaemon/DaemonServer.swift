internal import Logging
internal import NIOCore
internal import NIOPosix
internal import ProtectionWire
public import ServiceLifecycle

/// The Unix-socket server: accepts connections, learns each peer's
/// credentials, and serves each connection in its own child task. On
/// graceful shutdown it stops accepting and closes every connection.
public final class DaemonServer: Service {
    private let socketPath: String
    private let socketMode: UInt32
    private let socketGroup: String?
    private let maximumConnections: Int
    private let context: ConnectionContext
    private let registry = ConnectionRegistry()
    private let onReady: @Sendable () -> Void

    /// Makes a server; `onReady` runs once it accepts connections.
    public init(socketPath: String, socketMode: UInt32, socketGroup: String?, maximumConnections: Int,
                context: ConnectionContext, onReady: @escaping @Sendable () -> Void = {}) {
        self.socketPath = socketPath
        self.socketMode = socketMode
        self.socketGroup = socketGroup
        self.maximumConnections = maximumConnections
        self.context = context
        self.onReady = onReady
    }

    public func run() async throws {
        try ListeningSocket.prepare(path: socketPath)
        let maximumFrameLength = context.maximumFrameLength
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .bind(unixDomainSocketPath: socketPath) { channel in
                PeerCredentials.read(from: channel).flatMapThrowing { peer in
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(FrameDecoder(maximumFrameLength: maximumFrameLength)))
                    try channel.pipeline.syncOperations.addHandler(MessageToByteHandler(FrameEncoder()))
                    return (peer, try NIOAsyncChannel<Frame, Frame>(wrappingChannelSynchronously: channel))
                }
            }
        try ListeningSocket.applyPermissions(path: socketPath, mode: socketMode, group: socketGroup)
        context.logger.notice("serving", metadata: ["protd.socket": "\(socketPath)"])
        onReady()
        let registry = registry
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await (peer, connection) in inbound {
                        group.addTask { await self.serve(connection, peer: peer) }
                    }
                }
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
            registry.closeAll()
        }
        ListeningSocket.remove(path: socketPath)
        context.logger.notice("stopped serving")
    }

    private func serve(_ connection: NIOAsyncChannel<Frame, Frame>, peer: PeerCredentials) async {
        guard registry.add(connection.channel, limit: maximumConnections) else {
            context.logger.warning("connection refused: too many connections",
                                   metadata: ["protd.peer.uid": "\(peer.uid)"])
            try? await connection.executeThenClose { _, outbound in
                try await outbound.write(Response.error(WireError(
                    .tooManyConnections, "the daemon has \(maximumConnections) connections already; try again later"))
                    .frame(requestID: 0))
            }
            return
        }
        defer { registry.remove(connection.channel) }
        do {
            try await connection.executeThenClose { inbound, outbound in
                await Connection(peer: peer, context: context, outbound: outbound).run(inbound: inbound)
            }
        } catch {
            context.logger.debug("connection closed with an error", metadata: ["protd.error": "\(error)"])
        }
    }
}
