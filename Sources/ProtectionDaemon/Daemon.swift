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
/// When the state directory cannot be opened, or key memory cannot be
/// locked while `memory.require-locked` is set, it serves the fault
/// instead (`DaemonFault`) and keeps the socket.
public final class Daemon: Service {
    /// The server part.
    public let server: DaemonServer
    /// Why no files are served, or nil.
    public let fault: DaemonFault?
    private let core: (store: ProtectedStore, hub: EventHub, lockController: LockController)?
    private let logger: Logger

    /// Opens the state directory and prepares the server. `environment`
    /// supplies `CREDENTIALS_DIRECTORY`.
    public init(configuration: DaemonConfiguration, environment: [String: String], logger: Logger) throws {
        // Before any key exists: every guarded region checks its lock.
        MemoryLocking.requireLocked = configuration.requireLockedMemory
        var memoryFault: DaemonFault?
        if !MemoryLocking.probe() {
            logger.warning("""
                key memory cannot be locked in RAM (mlock refused: no CAP_IPC_LOCK and a low LimitMEMLOCK), \
                so keys could be swapped to disk; \
                \(configuration.requireLockedMemory ? "memory.require-locked is set, so protd holds no keys" : "set memory.require-locked to refuse this")
                """)
            if configuration.requireLockedMemory { memoryFault = .keyMemoryNotLocked }
        }
        let storeConfiguration = StoreConfiguration(
            stateDirectory: configuration.stateDirectory,
            deviceSecret: configuration.deviceSecretSource(environment: environment),
            formerDeviceSecret: configuration.formerDeviceSecretSource(environment: environment),
            passcodeCost: configuration.passcodeCost,
            failedAttemptPolicy: configuration.failedAttemptPolicy,
            segmentSize: configuration.segmentSize,
            cipher: configuration.cipher ?? .preferred,
            quota: StorageQuota(bytes: configuration.quotaBytesPerUID, files: configuration.quotaFilesPerUID),
            firstUnlockTimeout: configuration.firstUnlockTimeout)
        let limits = ClientLimits(
            connections: configuration.maxConnections, connectionsPerUID: configuration.maxConnectionsPerUID,
            filesPerConnection: configuration.maxOpenHandlesPerConnection,
            filesPerUID: configuration.maxOpenHandlesPerUID, subscribersPerUID: configuration.maxSubscribersPerUID)
        self.logger = logger
        let adminGroupID = GroupLookup.id(of: configuration.adminGroup)
        if adminGroupID == nil {
            logger.warning("admin group does not exist; only root and the daemon's user may administer protd",
                           metadata: ["protd.admin_group": "\(configuration.adminGroup)"])
        }
        let authorization = Authorization(adminGroupID: adminGroupID, daemonUID: getuid())
        let notifier = SystemdNotifier(environment: environment)
        let opening: Result<ProtectedStore, DaemonFault>
        if let memoryFault {
            opening = .failure(memoryFault)
        } else {
            do {
                opening = .success(try ProtectedStore(configuration: storeConfiguration) { [logger] notice in
                    let level: Logger.Level = notice.isWarning ? .warning : .notice
                    logger.log(level: level, "\(notice)")
                })
            } catch {
                opening = .failure(DaemonFault(openingStateFailedWith: error, in: configuration.stateDirectory))
            }
        }
        let store: ProtectedStore
        switch opening {
        case .success(let opened):
            store = opened
        case .failure(let fault):
            logger.critical("""
                serving no files: status reports why and other requests are refused; \
                fix it and restart protd
                """, metadata: ["protd.fault": "\(fault)", "protd.state_directory": "\(configuration.stateDirectory)"])
            self.fault = fault
            core = nil
            server = DaemonServer(
                listener: Self.listener(configuration, environment), limits: limits,
                fault: FaultContext(fault: fault, authorization: authorization,
                                    maximumFrameLength: configuration.maxFrameBytes,
                                    gracePeriod: configuration.gracePeriod, logger: logger),
                onReady: { notifier.ready() }, onStopping: { notifier.stopping() })
            return
        }
        let hub = EventHub()
        let lockController = LockController(store: store, hub: hub, defaultGrace: configuration.gracePeriod,
                                            logger: logger)
        fault = nil
        core = (store, hub, lockController)
        let context = ConnectionContext(
            store: store, lockController: lockController, hub: hub, authorization: authorization,
            maximumFrameLength: configuration.maxFrameBytes,
            limits: limits, logger: logger)
        let fileLimit = OpenFileLimit.raiseToHardLimit()
        let filesNeeded = OpenFileLimit.needed(connections: configuration.maxConnections + ClientLimits.connectionsKeptForAdmins
                                                   + ConnectionRegistry.maximumRefusedWaiting,
                                               filesPerConnection: configuration.maxOpenHandlesPerConnection)
        if fileLimit < filesNeeded {
            logger.warning("""
                the open-file limit is below what the connection and handle limits allow: a few clients \
                can exhaust it and then no one can connect; raise LimitNOFILE or lower the limits
                """, metadata: ["protd.open_file_limit": "\(fileLimit)", "protd.open_files_allowed": "\(filesNeeded)"])
        }
        server = DaemonServer(listener: Self.listener(configuration, environment), context: context,
                              onReady: { notifier.ready() }, onStopping: { notifier.stopping() },
                              beforeClosing: { await lockController.shutdownStarted() })
        logger.info("state loaded", metadata: ["protd.state": "\(store.lockState)",
                                               "protd.passcode_set": "\(store.status.passcodeSet)",
                                               "protd.cipher": "\(storeConfiguration.cipher)",
                                               "protd.libsodium": "\(SodiumRuntime.version)"])
    }

    /// The socket systemd passed, else a new one at the configured path.
    private static func listener(_ configuration: DaemonConfiguration, _ environment: [String: String])
        -> DaemonServer.Listener {
        SocketActivation.inheritedSocket(environment: environment).map { .inherited(fd: $0) }
            ?? .path(configuration.socketPath, mode: configuration.socketMode, group: configuration.socketGroup)
    }

    public func run() async throws {
        guard let (store, hub, lockController) = core else {
            try await server.run()
            logger.notice("stopped (fault state: no keys were loaded)")
            return
        }
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
