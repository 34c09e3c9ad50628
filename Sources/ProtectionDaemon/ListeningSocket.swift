internal import Glibc
internal import ProtectionCore

/// Preparing the socket path: the directory, refusing to steal the socket
/// of a daemon that is still serving, and the final mode and group.
enum ListeningSocket {
    /// Makes the socket's directory (mode 0755) and removes a stale socket
    /// file. Fails when another process still accepts on `path`.
    static func prepare(path: String) throws {
        guard path.utf8.count < 108 else {
            throw DaemonStartupError("socket path \(path) is longer than the 107 bytes a Unix socket address holds")
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try Posix.makeDirectories(String(path[..<slash]), mode: 0o755)
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw DaemonStartupError("\(path) exists and is not a socket; refusing to replace it")
        }
        if isServing(path) {
            throw DaemonStartupError("another process is already serving on \(path)")
        }
        unlink(path)
    }

    /// Removes the socket file at shutdown (only if it is a socket).
    static func remove(path: String) {
        var info = stat()
        if lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK { unlink(path) }
    }

    /// Sets the socket file's mode, and its group when given.
    static func applyPermissions(path: String, mode: UInt32, group: String?) throws {
        if let group {
            guard let gid = GroupLookup.id(of: group) else {
                throw DaemonStartupError(configuration: "socket group \(group) does not exist (socket.group)")
            }
            guard chown(path, uid_t.max, gid) == 0 else {
                throw DaemonStartupError("could not give \(path) to group \(group): \(String(cString: strerror(errno)))")
            }
        }
        guard chmod(path, mode_t(mode)) == 0 else {
            throw DaemonStartupError("could not set mode of \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Whether something accepts connections on `path`.
    static func isServing(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return UnixSocketAddress.with(path: path) { connect(fd, $0, $1) == 0 } ?? false
    }
}

/// Start-up failed; the message says why and what to fix.
public struct DaemonStartupError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    /// Whether a configured value is the cause (protd exits with 78, as
    /// for a configuration error found before start).
    public let isConfiguration: Bool

    init(_ description: String) {
        self.description = description
        isConfiguration = false
    }

    init(configuration description: String) {
        self.description = description
        isConfiguration = true
    }
}
