import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Where the kernel refuses `mlock` (no CAP_IPC_LOCK, RLIMIT_MEMLOCK 0),
/// protd says so instead of holding keys in swappable memory unnoticed.
@Suite("Key memory that cannot be locked", .serialized)
struct MemoryLockingEndToEndTests {
    static let isRoot = getuid() == 0
    /// Runs protd without CAP_IPC_LOCK and with no lockable memory.
    static let unlockable = ["/usr/bin/setpriv", "--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock",
                             "/usr/bin/prlimit", "--memlock=0:0", "--"]

    static func daemon(requireLocked: Bool) throws -> DaemonProcess {
        let daemon = try DaemonProcess(extraArguments: ["--memory-require-locked", "false"])
        daemon.stop()
        daemon.launcher = unlockable
        try daemon.start(extraArguments: ["--memory-require-locked", "\(requireLocked)"])
        return daemon
    }

    @Test("without memory.require-locked, protd warns at start and serves",
          .enabled(if: isRoot, "needs root to take CAP_IPC_LOCK away with setpriv"))
    func warnsAndServes() async throws {
        let daemon = try Self.daemon(requireLocked: false)
        #expect(daemon.log.contains("key memory cannot be locked in RAM"), "\(daemon.log)")
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("f").write(Array("x".utf8))
        #expect(try await client.file("f").read() == Array("x".utf8))
        await client.close()
    }

    @Test("a daemon with every capability locks its key memory and says nothing about it")
    func lockedIsQuiet() throws {
        let daemon = try DaemonProcess()
        #expect(!daemon.log.contains("cannot be locked"), "\(daemon.log)")
    }
}
