internal import Glibc

/// sd_notify over a plain datagram socket, without libsystemd: tells
/// systemd `READY=1` once protd serves, `STOPPING=1` when it shuts down and
/// `WATCHDOG=1` while alive. Does nothing when `NOTIFY_SOCKET` is unset.
public struct SystemdNotifier: Sendable {
    /// The notification socket: a path, or an abstract name starting with `@`.
    public let socketPath: String?

    /// Reads `NOTIFY_SOCKET` from `environment`.
    public init(environment: [String: String]) {
        let path = environment["NOTIFY_SOCKET"] ?? ""
        socketPath = path.isEmpty ? nil : path
    }

    /// The service is up and serving.
    public func ready() { send("READY=1\nSTATUS=serving") }
    /// The service is shutting down.
    public func stopping() { send("STOPPING=1\nSTATUS=stopping") }
    /// The watchdog keep-alive.
    public func watchdog() { send("WATCHDOG=1") }

    /// Sends one notification; failures are ignored, as sd_notify does.
    public func send(_ message: String) {
        guard let socketPath else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(message.utf8)
        _ = UnixSocketAddress.with(path: socketPath) { address, length in
            bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
        }
    }

    /// How often to ping: half of `WATCHDOG_USEC`, when systemd asked for
    /// a watchdog for this process.
    public static func watchdogInterval(environment: [String: String]) -> Duration? {
        guard let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"].flatMap(Int32.init), pid != getpid() { return nil }
        return .microseconds(Int64(usec / 2))
    }
}

/// Sockets passed by systemd socket activation (`LISTEN_FDS`,
/// `LISTEN_PID`), as sd_listen_fds(3) describes: descriptors from 3 on.
public enum SocketActivation {
    /// The first passed descriptor when the variables are meant for this
    /// process, else nil.
    public static func inheritedSocket(environment: [String: String]) -> Int32? {
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
              let count = environment["LISTEN_FDS"].flatMap(Int.init), count >= 1 else { return nil }
        let fd: Int32 = 3
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }
}
