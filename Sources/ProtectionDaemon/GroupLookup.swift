internal import Glibc

/// Group settings name a group or give its numeric id, as the
/// configuration documents: digits are taken as the id itself (a gid
/// needs no entry in the group database), anything else is looked up.
enum GroupLookup {
    /// The gid `group` names, or nil when no such group exists.
    static func id(of group: String) -> gid_t? {
        if !group.isEmpty, group.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // (gid_t)-1 means "leave the group" to chown: not a group.
            return gid_t(group).flatMap { $0 == gid_t.max ? nil : $0 }
        }
        return getgrnam(group).map { $0.pointee.gr_gid }
    }
}
