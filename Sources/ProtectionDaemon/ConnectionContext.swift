public import Logging
public import ProtectionCore

/// What every connection shares: the store, lock controller, event hub,
/// authorisation policy and limits.
public struct ConnectionContext: Sendable {
    /// The protected store.
    public let store: ProtectedStore
    /// Lock life cycle and events.
    public let lockController: LockController
    /// Event fan-out.
    public let hub: EventHub
    /// Who may lock, passwd, erase.
    public let authorization: Authorization
    /// Largest frame accepted from a client.
    public let maximumFrameLength: Int
    /// Connections, handles and subscriptions allowed, in total and per uid.
    public let limits: ClientLimits
    /// What each uid holds against `limits`.
    let holdings: UIDHoldings
    /// The daemon's logger.
    public let logger: Logger

    /// Bundles the shared parts.
    public init(store: ProtectedStore, lockController: LockController, hub: EventHub, authorization: Authorization,
                maximumFrameLength: Int, limits: ClientLimits, logger: Logger) {
        self.store = store
        self.lockController = lockController
        self.hub = hub
        self.authorization = authorization
        self.maximumFrameLength = maximumFrameLength
        self.limits = limits
        self.holdings = UIDHoldings(limits: limits)
        self.logger = logger
    }
}
