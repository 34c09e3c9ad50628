import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// protd on a file system that fills up: a small tmpfs mounted for the test.
@Suite("A full disk", .serialized)
struct FullDiskEndToEndTests {
    /// Whether a tmpfs can be mounted here: root, and not in a container
    /// that withholds CAP_SYS_ADMIN. Tried once, on a tiny one.
    static let canMount: Bool = {
        guard getuid() == 0, let probe = try? TemporaryDirectory("mount-probe") else { return false }
        defer { probe.remove() }
        guard (try? CommandRunner.run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe.path]))?.status == 0 else {
            return false
        }
        _ = try? CommandRunner.run("/bin/umount", [probe.path])
        return true
    }()

    /// A daemon whose directory (socket, state, log) is on a tmpfs of
    /// `mebibytes` mounted for the length of `body`, which gets the mount
    /// point and the daemon.
    static func withDaemonOnSmallFileSystem(mebibytes: Int, _ body: (String, DaemonProcess) async throws -> Void) async throws {
        let mountPoint = try TemporaryDirectory("fs")
        defer { mountPoint.remove() }
        let mount = try CommandRunner.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(mebibytes)m,mode=0700", "tmpfs", mountPoint.path])
        try #require(mount.status == 0, "mount failed: \(mount.stderr)")
        defer { _ = try? CommandRunner.run("/bin/umount", ["-l", mountPoint.path]) }
        let daemon = try DaemonProcess(logLevel: "warning", parentDirectory: mountPoint.path)
        defer { daemon.stop() }
        try await body(mountPoint.path, daemon)
    }

    /// Fills the file system holding `directory` with a plain file; returns its path.
    static func fill(_ directory: String) -> String {
        let path = directory + "/filler"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let block = [UInt8](repeating: 0, count: 64 << 10)
        var size = block.count
        while size >= 4096 {
            if block.withUnsafeBytes({ write(fd, $0.baseAddress, size) }) < 0 { size /= 2 }
        }
        close(fd)
        return path
    }

    @Test("writes that do not fit fail with ioFailure saying so, keep the old content and leave no temporary file",
          .enabled(if: canMount, "needs to mount a small tmpfs (root with CAP_SYS_ADMIN)"), .timeLimit(.minutes(3)))
    func writesThatDoNotFit() async throws {
        try await Self.withDaemonOnSmallFileSystem(mebibytes: 8) { _, daemon in
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            let old = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            try await client.file("kept").write(old)

            // Streamed: 16 MiB into the 7 or so left.
            let failure = await EndToEnd.error { try await client.file("kept").write(contentsOf: BoundedChunks(count: 16)) }
            #expect(failure?.code == .ioFailure)
            #expect(failure?.message.contains("No space left on device") == true, "\(String(describing: failure))")
            // Whole, in one frame's worth of chunks: 9 MiB.
            let whole = await EndToEnd.failure { try await client.file("whole").write([UInt8](repeating: 1, count: 9 << 20)) }
            #expect(whole == .ioFailure)

            #expect(try await client.file("kept").read() == old)
            #expect(await EndToEnd.failure { _ = try await client.file("whole").attributes } == .notFound)
            let leftovers = try daemon.writeTemporaries()
            #expect(leftovers.isEmpty, "temporary files left: \(leftovers)")
            // The space the failed writes took is free again.
            try await client.file("after").write([UInt8](repeating: 2, count: 5 << 20), protection: .none)
            #expect(try await client.file("after").attributes.size == 5 << 20)
        }
    }

    @Test("a passcode change on a full disk fails with ioFailure and changes nothing; with space again it works",
          .enabled(if: canMount, "needs to mount a small tmpfs (root with CAP_SYS_ADMIN)"), .timeLimit(.minutes(3)))
    func passcodeChangeOnAFullDisk() async throws {
        try await Self.withDaemonOnSmallFileSystem(mebibytes: 4) { root, daemon in
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            try await client.file("kept").write(Array("still here".utf8))
            let filler = Self.fill(root)

            let failure = await EndToEnd.error { try await client.setPasscode(EndToEnd.passcode) }
            #expect(failure?.code == .ioFailure)
            #expect(failure?.message.contains("No space left on device") == true, "\(String(describing: failure))")
            #expect(try await client.status().passcodeSet == false)
            #expect(try await client.file("kept").readString() == "still here")

            // The key bag on disk is the one from before the attempt.
            try FileManager.default.removeItem(atPath: filler)
            await client.close()
            try daemon.restart()
            let restarted = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            #expect(try await restarted.status().passcodeSet == false)
            #expect(try await restarted.file("kept").readString() == "still here")

            try await restarted.setPasscode(EndToEnd.passcode)
            await restarted.close()
            try daemon.restart()
            let again = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            try await again.unlock(passcode: EndToEnd.passcode)
            #expect(try await again.file("kept").readString() == "still here")
        }
    }

    @Test("a handle append or growing truncate that does not fit fails with ioFailure and leaves the file whole and usable; nor does a create leave a file",
          .enabled(if: canMount, "needs to mount a small tmpfs (root with CAP_SYS_ADMIN)"), .timeLimit(.minutes(3)))
    func handleWritesThatDoNotFit() async throws {
        try await Self.withDaemonOnSmallFileSystem(mebibytes: 4) { root, daemon in
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            let handle = try await client.file("log").open(.create(.completeUntilFirstUserAuthentication))
            // Appends of 100,000 bytes (a segment and a half) until one does not fit.
            var expected: [UInt8] = []
            var failure: DataProtectionError?
            while failure == nil {
                let piece = [UInt8](repeating: UInt8(truncatingIfNeeded: expected.count / 100_000 + 1), count: 100_000)
                do {
                    _ = try await handle.append(piece)
                    expected += piece
                } catch let error as DataProtectionError { failure = error }
            }
            #expect(failure?.code == .ioFailure)
            #expect(expected.count >= 3_000_000, "only \(expected.count) bytes fitted")
            #expect(try await handle.size() == UInt64(expected.count))
            #expect(try await client.file("log").read() == expected)
            #expect(await EndToEnd.failure { _ = try await handle.truncate(to: 50_000_000) } == .ioFailure)
            _ = try await handle.write([9, 9, 9], at: 5)
            expected.replaceSubrange(5..<8, with: [9, 9, 9])
            await handle.close()
            #expect(try await client.file("log").read() == expected)

            _ = Self.fill(root)
            #expect(await EndToEnd.failure { _ = try await client.file("new").open(.create(.none)) } == .ioFailure)
            #expect(await EndToEnd.failure { _ = try await client.file("new").attributes } == .notFound)
        }
    }

    @Test("unlocking on a full disk fails with ioFailure, uncounted (the attempt cannot be recorded); with space again it works",
          .enabled(if: canMount, "needs to mount a small tmpfs (root with CAP_SYS_ADMIN)"), .timeLimit(.minutes(3)))
    func unlockOnAFullDisk() async throws {
        try await Self.withDaemonOnSmallFileSystem(mebibytes: 4) { root, daemon in
            let setup = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            try await setup.setPasscode(EndToEnd.passcode)
            try await setup.file("kept").write(Array("still here".utf8))
            await setup.close()
            try daemon.restart()
            let filler = Self.fill(root)
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)

            for passcode in [EndToEnd.passcode, "wrong"] {
                let failure = await EndToEnd.error { try await client.unlock(passcode: passcode) }
                #expect(failure?.code == .ioFailure)
                #expect(failure?.message.contains("not counted") == true, "\(String(describing: failure))")
            }
            let status = try await client.status()
            #expect(status.state == .beforeFirstUnlock)
            #expect(status.failedAttempts == 0)

            try FileManager.default.removeItem(atPath: filler)
            try await client.unlock(passcode: EndToEnd.passcode)
            #expect(try await client.status().failedAttempts == 0)
            #expect(try await client.file("kept").readString() == "still here")
        }
    }
}
