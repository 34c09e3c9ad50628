internal import Foundation
internal import Glibc

/// A child process started with posix_spawn and reaped with waitpid, for
/// programs that close inherited descriptors (systemd-socket-activate
/// does): Foundation's `Process` watches a descriptor the child inherits
/// and would then block in `waitpid` for the whole test run.
public final class SpawnedProcess: @unchecked Sendable {
    /// The child's process id.
    public let pid: Int32
    private var exitStatus: Int32?

    /// Starts `arguments[0]` with `arguments`, stdout and stderr appended to `logPath`.
    public init(_ arguments: [String], logPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, arguments[0], &actions, nil, &argv, environ)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
        pid = child
    }

    /// Waits up to `timeout` seconds for the child to exit by itself;
    /// returns its exit status, or nil (killed) after the timeout.
    @discardableResult
    public func wait(timeout: Double = 30) -> Int32? {
        stop(signal: 0, timeout: timeout)
    }

    /// Sends `signal` (0: none) and waits up to `timeout` seconds; returns
    /// the exit status, or nil if it had to be killed.
    @discardableResult
    public func stop(signal: Int32 = 15, timeout: Double = 15) -> Int32? {
        if let exitStatus { return exitStatus }
        if signal != 0 { kill(pid, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        var status: Int32 = 0
        while Date() < deadline {
            if waitpid(pid, &status, WNOHANG) == pid {
                exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                return exitStatus
            }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        exitStatus = -1
        return nil
    }

    deinit { stop(signal: SIGKILL, timeout: 5) }
}
