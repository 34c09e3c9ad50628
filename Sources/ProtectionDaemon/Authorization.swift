/// Who may run the administrative operations (PROTECTION-MODEL section 6):
/// lock needs root or the admin group; passwd needs the admin group (and
/// the old passcode, checked by the key bag), and so do making and removing
/// a recovery key; checking the store needs the admin group; erase needs
/// root. Unlock, a reset with the recovery key and every file operation
/// are open to all, files within the peer's own namespace.
///
/// The daemon's own user counts as root here: it can already read and
/// delete the daemon's state directory, so this grants nothing new, and it
/// lets a developer administer the daemon `make run` started.
public struct Authorization: Sendable, Equatable {
    /// The admin group's id, when the configured group exists.
    public let adminGroupID: UInt32?
    /// The uid the daemon runs as.
    public let daemonUID: UInt32

    /// Makes a policy.
    public init(adminGroupID: UInt32?, daemonUID: UInt32) {
        self.adminGroupID = adminGroupID
        self.daemonUID = daemonUID
    }

    /// Root or the daemon's own user.
    private func isSuperuser(_ peer: PeerCredentials) -> Bool {
        peer.uid == 0 || peer.uid == daemonUID
    }

    /// Root, the daemon's user, or a member of the admin group.
    public func isAdmin(_ peer: PeerCredentials) -> Bool {
        isSuperuser(peer) || adminGroupID.map(peer.isMember(of:)) == true
    }

    /// May `peer` lock the device?
    public func mayLock(_ peer: PeerCredentials) -> Bool { isAdmin(peer) }
    /// May `peer` set or change the passcode?
    public func mayChangePasscode(_ peer: PeerCredentials) -> Bool { isAdmin(peer) }
    /// May `peer` make or remove a recovery key?
    public func mayManageRecoveryKey(_ peer: PeerCredentials) -> Bool { isAdmin(peer) }
    /// May `peer` check the store (which names every namespace's files)?
    public func mayCheckStore(_ peer: PeerCredentials) -> Bool { isAdmin(peer) }
    /// May `peer` erase everything?
    public func mayErase(_ peer: PeerCredentials) -> Bool { isSuperuser(peer) }
}
