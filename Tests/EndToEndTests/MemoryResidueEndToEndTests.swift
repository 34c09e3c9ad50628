import DataProtection
import Foundation
import Glibc
import ProtectionTestSupport
import Testing

/// What the real daemon's memory still holds after a lock or an unlock,
/// read through `/proc/PID/mem` (which needs root's `CAP_SYS_PTRACE`:
/// protd is not dumpable). Markers and passcodes are random per run, so
/// nothing left from an earlier run can be found, and they appear in no
/// file name, argument or log line.
@Suite("Memory residue in the daemon", .serialized)
struct MemoryResidueEndToEndTests {
    static let mayReadDaemonMemory = geteuid() == 0 || ProcessInfo.processInfo.environment["CI"] == "true"
    static let reason = "needs root (CAP_SYS_PTRACE) to read the daemon's /proc/PID/mem"

    @Test("after a lock, no class A plaintext written, read or held back by a write remains in the daemon's memory",
          .enabled(if: mayReadDaemonMemory, "\(reason)"), .timeLimit(.minutes(2)))
    func noClassAPlaintextAfterLock() async throws {
        let (daemon, client) = try await Self.unlockedDaemon(passcode: Self.randomText("passcode"))
        defer { _ = daemon }
        let marker = Array(Self.randomText("class-a-marker").utf8)
        let small = Array("small class A file: ".utf8) + marker + Array(" end".utf8)
        let large = Self.filled(count: (1 << 20) + 4321, with: marker)

        // Whole-file writes and reads, a one-chunk file and a streamed one.
        try await client.file("small").write(small, protection: .complete)
        try await client.file("large").write(large, protection: .complete)
        #expect(try await client.file("small").read() == small)
        let readsBack = try await client.file("large").read() == large
        #expect(readsBack, "the large file reads back as written")
        // Handle writes and reads: one handle closed before the lock, one
        // left open for the lock to invalidate.
        let closed = try await client.file("large").open()
        try await closed.write(Self.filled(count: 9000, with: marker), at: 65_000)
        #expect(try await closed.read(offset: 65_000, count: 9000) == Self.filled(count: 9000, with: marker))
        await closed.close()
        let open = try await client.file("small").open()
        _ = try await open.append(marker)
        #expect(try await open.read(offset: 0, count: small.count + marker.count) == small + marker)
        // A streamed write still in progress at the lock, holding back its
        // last segment: the client sends two whole chunks (and keeps the
        // rest); the temporary file grows past one chunk only once the
        // daemon has sealed the second.
        let (source, more) = AsyncStream<[UInt8]>.makeStream()
        more.yield(Self.filled(count: 2 * client.maximumChunkSize + 100, with: marker))
        let unfinished = Task { try await client.file("unfinished").write(contentsOf: source, protection: .complete) }
        let heldBack = try await EndToEnd.eventually {
            try daemon.writeTemporaries().contains { path in
                let size = try FileManager.default.attributesOfItem(atPath: daemon.stateDirectory + "/" + path)[.size]
                return (size as? Int ?? 0) > client.maximumChunkSize
            }
        }
        #expect(heldBack, "the daemon sealed the write's whole segments and holds back its tail")

        try await client.lock(grace: .zero, waitUntilLocked: true)
        let scan = try Self.scan(daemon, for: marker)
        #expect(scan.hits == 0, "class A marker in the daemon's memory after the lock: \(scan)")

        more.finish()
        #expect(await EndToEnd.failure { _ = try await unfinished.value } == .protectedDataUnavailable)
        #expect(await EndToEnd.failure { _ = try await open.read(offset: 0, count: 1) } == .protectedDataUnavailable)
        await client.close()
    }

    @Test("after an unlock and a passcode change, neither passcode remains in the daemon's memory",
          .enabled(if: mayReadDaemonMemory, "\(reason)"), .timeLimit(.minutes(2)))
    func noPasscodeAfterUnlock() async throws {
        let passcode = Self.randomText("passcode")
        let (daemon, client) = try await Self.unlockedDaemon(passcode: passcode)
        defer { _ = daemon }
        let afterUnlock = try Self.scan(daemon, for: Array(passcode.utf8))
        #expect(afterUnlock.hits == 0, "passcode in the daemon's memory after unlock: \(afterUnlock)")

        let changed = Self.randomText("new-passcode")
        try await client.setPasscode(changed, old: passcode)
        let old = try Self.scan(daemon, for: Array(passcode.utf8))
        let new = try Self.scan(daemon, for: Array(changed.utf8))
        #expect(old.hits == 0, "old passcode in the daemon's memory after the change: \(old)")
        #expect(new.hits == 0, "new passcode in the daemon's memory after the change: \(new)")
        await client.close()
    }

    @Test("after a recovery key is made and used, neither it nor the passcodes remain in the daemon's memory",
          .enabled(if: mayReadDaemonMemory, "\(reason)"), .timeLimit(.minutes(2)))
    func noRecoveryKeyAfterReset() async throws {
        let passcode = Self.randomText("passcode")
        let (daemon, client) = try await Self.unlockedDaemon(passcode: passcode)
        defer { _ = daemon }
        let key = try await client.createRecoveryKey(passcode: passcode)
        let afterCreate = try Self.scan(daemon, for: key.bytes)
        #expect(afterCreate.hits == 0, "recovery key in the daemon's memory after it was made: \(afterCreate)")

        let changed = Self.randomText("new-passcode")
        try await client.resetPasscode(recoveryKey: key, newPasscode: changed)
        for (what, pattern) in [("recovery key", key.bytes), ("old passcode", Array(passcode.utf8)),
                                ("new passcode", Array(changed.utf8))] {
            let scan = try Self.scan(daemon, for: pattern)
            #expect(scan.hits == 0, "\(what) in the daemon's memory after the reset: \(scan)")
        }
        await client.close()
    }

    /// A daemon whose passcode was set by an earlier run of it (so this
    /// one saw the passcode only in the unlock), unlocked, and its client.
    private static func unlockedDaemon(passcode: String) async throws -> (DaemonProcess, DataProtectionClient) {
        let daemon = try DaemonProcess()
        let setup = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await setup.setPasscode(passcode)
        await setup.close()
        try daemon.restart()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.unlock(passcode: passcode)
        return (daemon, client)
    }

    /// Scans the daemon, stopped meanwhile so the scan sees one moment.
    private static func scan(_ daemon: DaemonProcess, for pattern: [UInt8]) throws -> ProcessMemory.Scan {
        daemon.suspend()
        defer { daemon.resume() }
        let scan = try ProcessMemory.scan(pid: daemon.pid, for: pattern)
        #expect(scan.unreadable.isEmpty, "mappings the scan could not read: \(scan.unreadable)")
        return scan
    }

    /// `prefix`, a dash and 32 random hex digits.
    private static func randomText(_ prefix: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = (0..<2).map { _ in String(generator.next() as UInt64, radix: 16) }
            .map { String(repeating: "0", count: 16 - $0.count) + $0 }
        return "\(prefix)-\(digits.joined())"
    }

    /// `count` bytes of `marker` repeated, each copy followed by a line break.
    private static func filled(count: Int, with marker: [UInt8]) -> [UInt8] {
        let line = marker + [0x0A]
        return Array((0..<(count / line.count + 1)).lazy.flatMap { _ in line }.prefix(count))
    }
}
