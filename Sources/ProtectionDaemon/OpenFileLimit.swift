internal import Glibc

/// Every connection, open handle and write in progress holds a file
/// descriptor, and the usual soft limit (1024, also under systemd) is far
/// below what the connection and handle limits allow; one client could take
/// them all, after which no one can connect. The daemon therefore raises
/// its soft limit to the hard one at start.
enum OpenFileLimit {
    /// Descriptors kept for the daemon itself: the listening socket, the
    /// key bag, log and notification sockets, temporary files.
    static let reserve = 64

    /// Raises the soft limit to the hard limit (best effort: a system-call
    /// filter may refuse) and returns the limit now in force.
    static func raiseToHardLimit() -> UInt64 {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { return UInt64(raised.rlim_cur) }
        }
        return UInt64(limit.rlim_cur)
    }

    /// Descriptors the configured limits allow clients to hold at once.
    static func needed(connections: Int, filesPerConnection: Int) -> UInt64 {
        let (product, overflow) = UInt64(connections).multipliedReportingOverflow(by: UInt64(filesPerConnection) + 1)
        return overflow ? UInt64.max : product.addingReportingOverflow(UInt64(reserve)).partialValue
    }
}
