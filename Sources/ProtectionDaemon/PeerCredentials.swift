internal import CPeerCredentials
internal import NIOCore

/// Who is on the other end of a connection, as the kernel reports it
/// (`SO_PEERCRED`, `SO_PEERGROUPS`); never what the client claims.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    /// The peer's user id: its file namespace.
    public let uid: UInt32
    /// The peer's primary group id.
    public let gid: UInt32
    /// The peer's process id at connect time.
    public let pid: Int32
    /// The peer's supplementary groups.
    public let groups: [UInt32]

    /// Makes credentials (tests and the reader below).
    public init(uid: UInt32, gid: UInt32, pid: Int32, groups: [UInt32]) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.groups = groups
    }

    /// Whether the peer is in `group`, as primary or supplementary group.
    public func isMember(of group: UInt32) -> Bool {
        gid == group || groups.contains(group)
    }

    public var description: String { "uid \(uid) gid \(gid) pid \(pid)" }

    /// Reads the credentials of a connected Unix socket channel.
    static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ProtocolFailure("peer credentials are not available on this channel"))
        }
        let level = NIOBSDSocket.OptionLevel.socket
        return provider.unsafeGetSocketOption(level: level, name: NIOBSDSocket.Option(rawValue: protd_so_peercred))
            .and(provider.unsafeGetSocketOption(level: level, name: NIOBSDSocket.Option(rawValue: protd_so_peergroups))
                .map { (groups: protd_peer_groups) -> protd_peer_groups? in groups }
                .recover { _ in nil })
            .map { (credentials: protd_ucred, groups: protd_peer_groups?) in
                PeerCredentials(uid: credentials.uid, gid: credentials.gid, pid: credentials.pid,
                                groups: groups.map(Self.parse) ?? [])
            }
    }

    /// The kernel writes the groups sorted ascending into a zeroed buffer;
    /// the list ends where the order breaks. A lone leading 0 is ambiguous
    /// (group 0, or an empty list) and is dropped: the safe reading.
    static func parse(_ raw: protd_peer_groups) -> [UInt32] {
        let all = withUnsafeBytes(of: raw.gids) { Array($0.bindMemory(to: UInt32.self)) }
        var result: [UInt32] = []
        for gid in all {
            if let last = result.last, gid <= last { break }
            result.append(gid)
        }
        if result == [0] { return [] }
        return result
    }
}

/// A failure that ends one connection (not the daemon).
struct ProtocolFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
