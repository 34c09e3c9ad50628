internal import Glibc
public import Logging
public import ProtectionConfiguration
internal import ProtectionCore
internal import Sodium
public import ServiceLifecycle

/// The whole daemon built from its configuration: the store, lock
/// controller, event hub and server (on its own socket, or one passed by
/// systemd socket activation, telling systemd when it is ready). Run it as a `Service`; when it
/// returns (graceful shutdown), every handle is closed and every key wiped.
public final class Daemon: Service {
    /// The server part.
    public let server: DaemonServer
    private let store: ProtectedStore
    private let hub: EventHub
    private let lockController: LockController
    private let logger: Logger

    /// Opens the state directory and prepares the server. `environment`
    /// supplies `CREDENTIALS_DIRECTORY`.
    public init(configuration: DaemonConfiguration, environment: [String: String], logger: Logger) throws {
        // Before any key exists: every guarded region checks its lock.
        MemoryLocking.requireLocked = configuration.requireLockedMemory
        if !MemoryLocking.probe() {
            logger.warning("""
                key memory cannot be locked in RAM (mlock refused: no CAP_IPC_LOCK and a low LimitMEMLOCK), \
                so keys could be swapped to disk; \
                \(configuration.requireLockedMemory ? "memory.require-locked is set, so protd holds no keys" : "set memory.require-locked to refuse this")
                """)
        }
        let storeConfiguration = StoreConfiguration(
            stateDirectory: configuration.stateDirectory,
            deviceSecret: configuration.deviceSecretSource(environment: environment),
            passcodeCost: configuration.passcodeCost,
            failedAttemptPolicy: configuration.failedAttemptPolicy,
            segmentSize: configuration.segmentSize,
            cipher: configuration.cipher ?? .preferred)
        store = try ProtectedStore(configuration: storeConfiguration)
        hub = EventHub()
        lockController = LockController(store: store, hub: hub, defaultGrace: configuration.gracePeriod, logger: logger)
        self.logger = logger
        let adminGroupID = GroupLookup.id(of: configuration.adminGroup)
        if adminGroupID == nil {
            logger.warning("admin group does not exist; only root may lock or change the passcode",
                           metadata: ["protd.admin_group": "\(configuration.adminGroup)"])
        }
        let context = ConnectionContext(
            store: store, lockController: lockController, hub: hub,
            authorization: Authorization(adminGroupID: adminGroupID, daemonUID: getuid()),
            maximumFrameLength: configuration.maxFrameBytes,
            maximumOpenHandles: configuration.maxOpenHandlesPerConnection, logger: logger)
        let fileLimit = OpenFileLimit.raiseToHardLimit()
        let filesNeeded = OpenFileLimit.needed(connections: configuration.maxConnections + DaemonServer.slotsKeptForAdmins
                                                   + ConnectionRegistry.maximumRefusedWaiting,
                                               filesPerConnection: configuration.maxOpenHandlesPerConnection)
        if fileLimit < filesNeeded {
            logger.warning("""
                the open-file limit is below what the connection and handle limits allow: a few clients \
                can exhaust it and then no one can connect; raise LimitNOFILE or lower the limits
                """, metadata: ["protd.open_file_limit": "\(fileLimit)", "protd.open_files_allowed": "\(filesNeeded)"])
        }
        let notifier = SystemdNotifier(environment: environment)
        let listener: DaemonServer.Listener = SocketActivation.inheritedSocket(environment: environment)
            .map { .inherited(fd: $0) }
            ?? .path(configuration.socketPath, mode: configuration.socketMode, group: configuration.socketGroup)
        server = DaemonServer(listener: listener, maximumConnections: configuration.maxConnections, context: context,
                              onReady: { notifier.ready() }, onStopping: { notifier.stopping() })
        logger.info("state loaded", metadata: ["protd.state": "\(store.lockState)",
                                               "protd.passcode_set": "\(store.status.passcodeSet)",
                                               "protd.cipher": "\(storeConfiguration.cipher)",
                                               "protd.libsodium": "\(SodiumRuntime.version)"])
    }

    public func run() async throws {
        defer {
            hub.finishAll()
            store.shutdown()
            logger.notice("keys wiped; stopped")
        }
        do {
            try await server.run()
        } catch {
            await lockController.stop()
            throw error
        }
        await lockController.stop()
    }
}
