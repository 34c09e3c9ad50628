internal import CProcessHardening
internal import Glibc

/// Keeps the daemon's memory (keys, passcodes, plaintext) out of core files
/// and away from other processes of its user, however it was started: the
/// systemd unit's `LimitCORE=0` covers only systemd. Like ssh-agent, the
/// process makes itself not dumpable, so the kernel writes no core file and
/// refuses ptrace and `/proc/PID/mem` to anyone without `CAP_SYS_PTRACE`;
/// and it sets its core size limit to 0, for core handlers that ignore the
/// dumpable flag (`fs.suid_dumpable=2`).
public enum ProcessHardening {
    /// Applies both settings; call before any secret is read. Only a
    /// failing `PR_SET_DUMPABLE` is an error: a system-call filter may
    /// refuse `setrlimit` (EPERM), and whoever filters it also sets the
    /// limit (the unit's `LimitCORE=0`).
    public static func apply() throws(DaemonStartupError) {
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        if setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore) != 0 && errno != EPERM {
            throw DaemonStartupError("could not turn off core dumps: \(String(cString: strerror(errno)))")
        }
        guard protd_set_not_dumpable() == 0 else {
            throw DaemonStartupError("could not make the process not dumpable: \(String(cString: strerror(errno)))")
        }
    }
}
