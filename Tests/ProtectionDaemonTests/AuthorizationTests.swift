@testable import ProtectionDaemon
import CPeerCredentials
import ProtectionCore
import ProtectionWire
import Testing

@Suite("Who may do what")
struct AuthorizationTests {
    let policy = Authorization(adminGroupID: 50, daemonUID: 999)

    @Test("root may lock, change the passcode, manage the recovery key, check the store and erase")
    func root() {
        let root = PeerCredentials(uid: 0, gid: 0, pid: 1, groups: [])
        #expect(policy.mayLock(root) && policy.mayChangePasscode(root) && policy.mayErase(root))
        #expect(policy.mayManageRecoveryKey(root) && policy.mayCheckStore(root))
    }

    @Test("the daemon's own user may do what root may")
    func daemonUser() {
        let own = PeerCredentials(uid: 999, gid: 999, pid: 4, groups: [])
        #expect(policy.mayLock(own) && policy.mayChangePasscode(own) && policy.mayErase(own))
        #expect(policy.mayManageRecoveryKey(own) && policy.mayCheckStore(own))
    }

    @Test("an admin-group member may lock, change the passcode, manage the recovery key and check the store but not erase")
    func adminMember() {
        let supplementary = PeerCredentials(uid: 1000, gid: 1000, pid: 2, groups: [27, 50])
        let primary = PeerCredentials(uid: 1001, gid: 50, pid: 3, groups: [])
        for peer in [supplementary, primary] {
            #expect(policy.mayLock(peer))
            #expect(policy.mayChangePasscode(peer))
            #expect(policy.mayManageRecoveryKey(peer))
            #expect(policy.mayCheckStore(peer))
            #expect(!policy.mayErase(peer))
        }
    }

    @Test("anyone else may do none of them, and nobody is admin when the group is missing")
    func others() {
        let user = PeerCredentials(uid: 1000, gid: 1000, pid: 2, groups: [27])
        #expect(!policy.mayLock(user) && !policy.mayChangePasscode(user) && !policy.mayErase(user))
        #expect(!policy.mayManageRecoveryKey(user) && !policy.mayCheckStore(user))
        let noGroup = Authorization(adminGroupID: nil, daemonUID: 999)
        #expect(!noGroup.mayLock(PeerCredentials(uid: 1000, gid: 50, pid: 2, groups: [50])))
    }

    @Test("the kernel's group list is read up to its zero padding")
    func groupParsing() {
        var raw = protd_peer_groups()
        withUnsafeMutableBytes(of: &raw.gids) { buffer in
            let gids = buffer.bindMemory(to: UInt32.self)
            gids[0] = 4; gids[1] = 27; gids[2] = 1000
        }
        #expect(PeerCredentials.parse(raw) == [4, 27, 1000])
        #expect(PeerCredentials.parse(protd_peer_groups()) == [])
        withUnsafeMutableBytes(of: &raw.gids) { buffer in
            let gids = buffer.bindMemory(to: UInt32.self)
            gids[0] = 0; gids[1] = 5; gids[2] = 0
        }
        #expect(PeerCredentials.parse(raw) == [0, 5])
    }
}

@Suite("Group settings")
struct GroupLookupTests {
    @Test("a numeric group is taken as the gid itself, even with no entry in the group database")
    func numericGroup() {
        #expect(GroupLookup.id(of: "0") == 0)
        #expect(GroupLookup.id(of: "54321") == 54321)
    }

    @Test("a group name is looked up, and an unknown name has no gid")
    func namedGroup() {
        #expect(GroupLookup.id(of: "root") == 0)
        #expect(GroupLookup.id(of: "no-such-group-protd") == nil)
    }
}

extension GroupLookupTests {
    @Test("gid 4294967295, which chown reads as 'leave the group', is no group")
    func reservedGroupID() {
        #expect(GroupLookup.id(of: "4294967295") == nil)
        #expect(GroupLookup.id(of: "99999999999") == nil)
    }
}
