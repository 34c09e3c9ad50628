internal import ProtectionWire
internal import Synchronization

/// How much clients may hold at once, in total and per uid (the `limits.*`
/// keys); every uid, administrators included, gets the same share.
public struct ClientLimits: Sendable, Equatable {
    /// Connections kept for administrators (root, the daemon's user, the
    /// admin group) beyond `connections`, serving administration only.
    public static let connectionsKeptForAdmins = 8

    /// Ordinary connections at once (`limits.max-connections`).
    public var connections: Int
    /// Ordinary connections of one uid (`limits.max-connections-per-uid`).
    public var connectionsPerUID: Int
    /// Handles plus writes in progress of one connection
    /// (`limits.max-open-handles-per-connection`).
    public var filesPerConnection: Int
    /// Handles plus writes in progress of one uid over all its connections
    /// (`limits.max-open-handles-per-uid`).
    public var filesPerUID: Int
    /// Event subscriptions of one uid (`limits.max-subscribers-per-uid`).
    public var subscribersPerUID: Int

    /// Limits as configured.
    public init(connections: Int, connectionsPerUID: Int, filesPerConnection: Int, filesPerUID: Int,
                subscribersPerUID: Int) {
        self.connections = connections
        self.connectionsPerUID = connectionsPerUID
        self.filesPerConnection = filesPerConnection
        self.filesPerUID = filesPerUID
        self.subscribersPerUID = subscribersPerUID
    }
}

/// Which connections may be served. Everyone shares `connections`
/// ordinary slots, at most `connectionsPerUID` each. An administrator with
/// no ordinary slot left to it (all taken, or its uid's share used) gets
/// one of the `connectionsKeptForAdmins` kept slots, which serve only
/// `status`, `lock`, `unlock`, `loginUnlock`, `passwd`, `erase` and the
/// recovery key requests (`servesOnKeptSlot`):
/// an administrator's ordinary work (files, subscriptions) on one gets the
/// connection closed, so it cannot use up the slots by mistake.
struct ConnectionSlots: Sendable {
    /// The kind of slot a connection holds.
    enum Slot: Sendable, Equatable {
        case ordinary
        /// Kept for administrators: administration only.
        case kept
    }

    let limits: ClientLimits
    private(set) var ordinary = 0
    private(set) var kept = 0
    /// Ordinary slots held, by uid (no entry: none).
    private var ordinaryByUID: [UInt32: Int] = [:]

    init(limits: ClientLimits) {
        self.limits = limits
    }

    /// Takes a slot for a connection of `uid`; the refusal names the limit
    /// that was reached.
    mutating func admit(uid: UInt32, isAdmin: Bool) -> Result<Slot, WireError> {
        let held = ordinaryByUID[uid, default: 0]
        if ordinary < limits.connections && held < limits.connectionsPerUID {
            ordinary += 1
            ordinaryByUID[uid] = held + 1
            return .success(.ordinary)
        }
        if isAdmin && kept < ClientLimits.connectionsKeptForAdmins {
            kept += 1
            return .success(.kept)
        }
        let message = held >= limits.connectionsPerUID
            ? "uid \(uid) already holds \(held) connections, the most limits.max-connections-per-uid allows; close some first"
            : "the daemon already serves \(ordinary) connections, the most limits.max-connections allows"
        return .failure(WireError(.tooManyConnections, message))
    }

    /// Gives back a slot `admit` gave to `uid`.
    mutating func release(_ slot: Slot, uid: UInt32) {
        switch slot {
        case .kept:
            kept -= 1
        case .ordinary:
            ordinary -= 1
            let held = ordinaryByUID[uid, default: 1] - 1
            ordinaryByUID[uid] = held > 0 ? held : nil
        }
    }

    /// Whether a connection on a kept slot may make `request`.
    static func servesOnKeptSlot(_ request: Request) -> Bool {
        switch request {
        case .status, .lock, .unlock, .loginUnlock, .passwd, .erase, .recoveryCreate, .recoveryRemove, .recoveryReset: true
        default: false
        }
    }

    /// The answer to any other request on a kept slot; the connection closes.
    static let keptSlotRefusal = WireError(.tooManyConnections, """
        this connection holds a slot kept for administrators, which serves only status, lock, unlock, login \
        unlock, passwd, erase and the recovery key requests, because limits.max-connections or limits.max-connections-per-uid left it no other
        """)
}

/// What each uid holds over all its connections, against the per-uid
/// limits: handles plus writes in progress, and event subscriptions.
final class UIDHoldings: Sendable {
    /// A kind of thing a uid holds.
    enum Kind: Sendable {
        /// An open handle or a whole-file write in progress.
        case file
        /// An event subscription.
        case subscription
    }

    private struct Held {
        var files = 0
        var subscriptions = 0
    }

    private let limits: ClientLimits
    private let held = Mutex<[UInt32: Held]>([:])

    init(limits: ClientLimits) {
        self.limits = limits
    }

    /// Counts one more `kind` for `uid`, or throws `tooManyHandles` naming
    /// the limit when it already holds the most allowed.
    func take(_ kind: Kind, for uid: UInt32) throws {
        try held.withLock { held in
            var entry = held[uid] ?? Held()
            switch kind {
            case .file:
                guard entry.files < limits.filesPerUID else {
                    throw WireError(.tooManyHandles, "uid \(uid) already holds \(entry.files) handles and writes in "
                                    + "progress, the most limits.max-open-handles-per-uid allows; close or finish some first")
                }
                entry.files += 1
            case .subscription:
                guard entry.subscriptions < limits.subscribersPerUID else {
                    throw WireError(.tooManyHandles, "uid \(uid) already holds \(entry.subscriptions) event subscriptions, "
                                    + "the most limits.max-subscribers-per-uid allows; end one first")
                }
                entry.subscriptions += 1
            }
            held[uid] = entry
        }
    }

    /// Gives back `count` of `kind` that `uid` took.
    func give(_ kind: Kind, count: Int = 1, for uid: UInt32) {
        guard count > 0 else { return }
        held.withLock { held in
            var entry = held[uid] ?? Held()
            switch kind {
            case .file: entry.files -= count
            case .subscription: entry.subscriptions -= count
            }
            held[uid] = entry.files <= 0 && entry.subscriptions <= 0 ? nil : entry
        }
    }
}
