import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Where the kernel refuses `mlock` (no CAP_IPC_LOCK, RLIMIT_MEMLOCK 0),
/// protd says so instead of holding keys in swappable memory unnoticed.
@Suite("Key memory that cannot be locked", .serialized)
struct MemoryLockingEndToEndTests {
    static let isRoot = getuid() == 0
    static let protctl = CommandRunner.builtProduct("protctl")
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
        let status = try await client.status()
        #expect(!status.keyMemoryLocked && status.fault == nil)
        await client.close()
        let shown = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "status"])
        #expect(shown.stdout.contains("key memory: NOT locked in RAM"), "\(shown.stdout)")
        let json = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "--json", "status"])
        #expect(json.json?["keyMemoryLocked"] as? Bool == false, "\(json.stdout)")
    }

    @Test("with memory.require-locked, protd holds no keys: it serves the fault state, which says why",
          .enabled(if: isRoot, "needs root to take CAP_IPC_LOCK away with setpriv"))
    func requiredLockRefusesKeys() async throws {
        let daemon = try Self.daemon(requireLocked: true)
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let status = try await client.status()
        #expect(!status.keyMemoryLocked && !status.isProtectedDataAvailable)
        #expect(status.fault?.contains("memory.require-locked is set") == true, "\(String(describing: status.fault))")
        let error = await EndToEnd.error { try await client.file("f").write(Array("x".utf8)) }
        #expect(error?.code == .ioFailure)
        #expect(error?.message.contains("key memory cannot be locked in RAM") == true, "\(String(describing: error))")
        await client.close()
        let shown = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "status"])
        #expect(shown.stdout.contains("fault: key memory cannot be locked in RAM"), "\(shown.stdout)")
    }

    @Test("a daemon with every capability locks its key memory and says nothing about it")
    func lockedIsQuiet() async throws {
        let daemon = try DaemonProcess()
        #expect(!daemon.log.contains("cannot be locked"), "\(daemon.log)")
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await client.status().keyMemoryLocked)
        await client.close()
    }
}
