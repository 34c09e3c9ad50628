import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

@Suite("Bad input, bad passcodes and shutdown", .serialized)
struct RobustnessEndToEndTests {
    @Test("daemons started by tests ignore PROTD_* settings left in the environment, but take those asked for")
    func testDaemonsIgnoreInheritedSettings() {
        let environment = DaemonProcess.childEnvironment(
            inheriting: ["PATH": "/usr/bin", "PROTD_SOCKET_PATH": "/elsewhere", "PROTD_LOG_LEVEL": "trace"],
            adding: ["PROTD_LOG_LEVEL": "error"])
        #expect(environment == ["PATH": "/usr/bin", "PROTD_LOG_LEVEL": "error"])
    }

    @Test("the daemon turns off its own core dumps, and is hidden from other processes of its user")
    func noCoreDumps() throws {
        let daemon = try DaemonProcess()
        let limits = try String(contentsOfFile: "/proc/\(daemon.pid)/limits", encoding: .utf8)
        let coreLine = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        #expect(coreLine.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"])
        // Not dumpable: its /proc files belong to root, so a non-root test
        // user (the daemon's own) can no longer read its environment.
        if getuid() != 0 {
            #expect(FileManager.default.contents(atPath: "/proc/\(daemon.pid)/environ") == nil)
        }
    }

    @Test("an unlock that Argon2id has no memory for fails clearly and is not counted as a failed attempt",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "needs prlimit (util-linux)"))
    func argon2OutOfMemoryIsNotAFailedAttempt() async throws {
        // A 128 MiB Argon2id cost, then an address-space limit 64 MiB above
        // what the daemon uses: the passcode check cannot get its memory.
        let daemon = try DaemonProcess(argon2: (1, 128 * 1024))
        let setup = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await setup.setPasscode(EndToEnd.passcode)
        await setup.close()
        try daemon.restart()
        let status = try String(contentsOfFile: "/proc/\(daemon.pid)/status", encoding: .utf8)
        let sizeLine = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmSize:") })
        let sizeKiB = try #require(Int(sizeLine.split(whereSeparator: \.isWhitespace)[1]))
        func limitAddressSpace(_ soft: String) throws {
            let result = try CommandRunner.run("/usr/bin/prlimit", ["--pid", "\(daemon.pid)", "--as=\(soft):unlimited"])
            try #require(result.status == 0, "prlimit failed: \(result.stderr)")
        }
        try limitAddressSpace("\((sizeKiB + 64 * 1024) * 1024)")
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        do {
            try await client.unlock(passcode: EndToEnd.passcode)
            Issue.record("the unlock succeeded under the memory limit")
        } catch {
            #expect(error.code == .ioFailure)
            #expect("\(error)".contains("not counted"), "\(error)")
        }
        #expect(try await client.status().failedAttempts == 0)
        try limitAddressSpace("unlimited")
        try await client.unlock(passcode: EndToEnd.passcode)
        #expect(try await client.status().state == .unlocked)
    }

    @Test("writes in progress count toward the per-connection handle limit; the refused write gets one answer")
    func writesCountTowardTheHandleLimit() throws {
        let daemon = try DaemonProcess(extraConfig: "limits:\n  max-open-handles-per-connection: 2\n")
        let raw = try RawConnection(path: daemon.socketPath)
        defer { raw.close() }
        try raw.handshake()
        func writeBegin(_ name: String, id: UInt32) throws {
            // name (u16 length + bytes), class none (4), durable false
            try raw.send(type: 0x07, id: id, body: [0, UInt8(name.utf8.count)] + Array(name.utf8) + [4, 0])
        }
        try writeBegin("a", id: 10)
        try writeBegin("b", id: 11)
        try writeBegin("c", id: 12)
        let refused = try #require(try raw.readFrame())
        #expect(refused.type == 0x8F && refused.id == 12)
        #expect(Array(refused.body.prefix(2)) == [0, 17], "tooManyHandles")
        // The refused id's chunk and end are ignored; the first write completes.
        try raw.send(type: 0x08, id: 12, body: [0, 0, 0, 1, 9])
        try raw.send(type: 0x09, id: 12, body: [])
        try raw.send(type: 0x08, id: 10, body: [0, 0, 0, 2, 1, 2])
        try raw.send(type: 0x09, id: 10, body: [])
        let written = try #require(try raw.readFrame())
        #expect(written.type == 0x83 && written.id == 10)
        #expect(written.body == [0, 0, 0, 0, 0, 0, 0, 2])
    }

    @Test("a cancelled task still closes its handle and abandons its write, so the connection does not fill up")
    func cancelledTasksReleaseHandlesAndWrites() async throws {
        let daemon = try DaemonProcess(extraConfig: "limits:\n  max-open-handles-per-connection: 1\n")
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("kept").write([1, 2, 3], protection: .none)
        let handle = try await client.file("kept").open(.existing)
        await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await handle.close()
        }.value
        let reopened = try await Self.eventually { try await client.file("kept").open(.existing) }
        #expect(reopened != nil)
        await reopened?.close()

        let (chunks, feed) = AsyncStream.makeStream(of: [UInt8].self)
        feed.yield([UInt8](repeating: 5, count: 1000))
        let writer = Task { try await client.file("abandoned").write(contentsOf: chunks, protection: .none) }
        try await Task.sleep(for: .milliseconds(200))
        writer.cancel()
        _ = await writer.result
        let second = try await Self.eventually { try await client.file("kept").write([4], protection: .none) }
        #expect(second == 1)
        #expect(await EndToEnd.failure { _ = try await client.file("abandoned").read() } == .notFound)
        await client.close()
    }

    @Test("a handle read with a count far past the end returns the file, without asking for the whole count")
    func handleReadPastTheEnd() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("small").write([UInt8](repeating: 3, count: 300_000), protection: .none)
        let handle = try await client.file("small").open(.existing)
        #expect(try await handle.read(offset: 0, count: 1 << 40).count == 300_000)
        #expect(try await handle.read(offset: 299_990, count: Int.max).count == 10)
        await handle.close()
        await client.close()
    }

    /// `body`'s result once it stops failing with `tooManyHandles` (the
    /// clean-up frames of a cancelled task go out on their own), within 5 s.
    private static func eventually<T>(_ body: () async throws -> T) async throws -> T? {
        for _ in 0..<100 {
            do {
                return try await body()
            } catch DataProtectionError.tooManyHandles {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        return nil
    }

    /// A well-behaved client keeps working while `attack` misbehaves.
    private func expectSurvives(_ daemon: DaemonProcess, _ attack: (RawConnection) throws -> Void) async throws {
        let good = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await good.file("before").write([1], protection: .none)
        let raw = try RawConnection(path: daemon.socketPath)
        try attack(raw)
        // The daemon answers with a protocol error on request id 0, then closes.
        let answer = try raw.readFrame()
        if let answer {
            #expect(answer.type == 0x8F)
            #expect(answer.id == 0)
        }
        #expect(raw.readsEndOfStream())
        raw.close()
        try await good.file("after").write([2], protection: .none)
        #expect(try await good.file("before").read() == [1])
        #expect(try await good.list().count == 2)
        await good.close()
    }

    @Test("garbage bytes get an error and a close while another client keeps working")
    func garbage() async throws {
        let daemon = try DaemonProcess()
        try await expectSurvives(daemon) { try $0.sendRaw([0, 0, 0, 2, 0xde, 0xad, 0xbe, 0xef]) }
    }

    @Test("an oversized length is refused before its body is read")
    func oversizedLength() async throws {
        let daemon = try DaemonProcess()
        try await expectSurvives(daemon) { try $0.sendRaw([0xFF, 0xFF, 0xFF, 0xF0, 1, 0, 0, 0, 1]) }
    }

    @Test("an unknown message type after the hello is a protocol error")
    func unknownType() async throws {
        let daemon = try DaemonProcess()
        try await expectSurvives(daemon) { raw in
            try raw.handshake()
            try raw.send(type: 0x7E, id: 5, body: [1, 2, 3])
        }
    }

    @Test("a request before the hello is a protocol error")
    func noHello() async throws {
        let daemon = try DaemonProcess()
        try await expectSurvives(daemon) { try $0.send(type: 0x02, id: 1, body: []) }
    }

    @Test("request id 0 is reserved for events and closes the connection")
    func requestIDZero() async throws {
        let daemon = try DaemonProcess()
        try await expectSurvives(daemon) { raw in
            try raw.handshake()
            try raw.send(type: 0x02, id: 0, body: [])
        }
    }

    @Test("a frame cut off by the client closing is harmless")
    func truncatedFrame() async throws {
        let daemon = try DaemonProcess()
        let raw = try RawConnection(path: daemon.socketPath)
        try raw.handshake()
        try raw.sendRaw([0, 0, 0, 50, 0x16, 0, 0, 0])
        raw.close()
        let good = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await good.status().state == .unlocked)
    }

    @Test("a write chunk cut off mid-body by the client closing is harmless: no file, no temporary file, others served")
    func truncatedChunk() async throws {
        let daemon = try DaemonProcess()
        let raw = try RawConnection(path: daemon.socketPath)
        try raw.handshake()
        // writeBegin "cut", class none, not durable; then a 200,000-byte
        // chunk of which half arrives (copied out by the daemon as it comes).
        try raw.send(type: 0x07, id: 2, body: [0, 3] + Array("cut".utf8) + [0, 0])
        let length = UInt32(5 + 4 + 200_000)
        try raw.sendRaw(withUnsafeBytes(of: length.bigEndian) { Array($0) } + [0x08, 0, 0, 0, 2]
                        + withUnsafeBytes(of: UInt32(200_000).bigEndian) { Array($0) }
                        + [UInt8](repeating: 9, count: 100_000))
        try await Task.sleep(for: .milliseconds(100))
        raw.close()
        let good = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await good.status().state == .unlocked)
        try await Task.sleep(for: .milliseconds(200))
        #expect(await EndToEnd.failure { _ = try await good.file("cut").attributes } == .notFound)
        let leftovers = try daemon.writeTemporaries()
        #expect(leftovers.isEmpty, "temporary files left: \(leftovers)")
        try await good.file("whole").write([UInt8](repeating: 3, count: 700_000), protection: .none)
        #expect(try await good.file("whole").read() == [UInt8](repeating: 3, count: 700_000))
    }

    @Test("a daemon killed mid-write: the write fails with daemonUnavailable, and a restart keeps the old content and removes the temporary file",
          .timeLimit(.minutes(1)))
    func daemonKilledMidWrite() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let old = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 13) }
        try await client.file("kept").write(old)
        // 64 chunks of 512 KiB; SIGKILL as the ninth is asked for, 4 MiB in,
        // once the daemon has begun the new version (its temporary file is
        // there).
        let chunks = ObservedChunks(count: 64, size: 512 << 10) { index in
            guard index == 8 else { return }
            let deadline = Date().addingTimeInterval(10)
            while (try? daemon.writeTemporaries())?.isEmpty ?? true, Date() < deadline { usleep(2_000) }
            daemon.kill9()
        }
        let code = await EndToEnd.failure { try await client.file("kept").write(contentsOf: chunks) }
        #expect(code == .daemonUnavailable)
        #expect(await EndToEnd.failure { _ = try await client.status() } == .daemonUnavailable)
        let killedWrites = try daemon.writeTemporaries()
        #expect(killedWrites.count == 1, "the killed write's temporary file: \(killedWrites)")
        try daemon.start()
        let leftovers = try daemon.writeTemporaries()
        #expect(leftovers.isEmpty, "temporary files left: \(leftovers)")
        let again = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await again.file("kept").read() == old)
    }

    @Test("five wrong passcodes bring rate limiting with a retry-after, and a restart does not lift it")
    func rateLimitSurvivesRestart() async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode()
        for attempt in 1...5 {
            let code = await EndToEnd.failure { try await client.unlock(passcode: "wrong \(attempt)") }
            #expect(code == .wrongPasscode)
        }
        do {
            try await client.unlock(passcode: EndToEnd.passcode)
            Issue.record("unlock inside the delay succeeded")
        } catch DataProtectionError.rateLimited(let retryAfter, _) {
            #expect(retryAfter > .seconds(50) && retryAfter <= .seconds(60))
        }
        await client.close()
        try daemon.restart()
        let again = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await again.status().failedAttempts == 5)
        #expect(await EndToEnd.failure { try await again.unlock(passcode: EndToEnd.passcode) } == .rateLimited)
    }

    @Test("SIGTERM with clients connected and handles open exits 0 within 10 s and leaves no temporary files")
    func gracefulShutdown() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let handle = try await client.file("open").open(.create(.completeUntilFirstUserAuthentication))
        _ = try await handle.append([UInt8](repeating: 7, count: 100_000))
        let other = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        _ = try await other.subscribe()
        // A streamed write left half done: longer than a chunk, so a direct
        // write whose reading thread waits on its socket.
        let chunks = AsyncStream<[UInt8]> { continuation in
            continuation.yield([UInt8](repeating: 1, count: 700_000))
        }
        let writer = Task { try await other.file("half").write(contentsOf: chunks, protection: .none) }
        try await Task.sleep(for: .milliseconds(300))
        let result = try #require(daemon.stop())
        #expect(result.status == 0)
        #expect(result.seconds < 10)
        writer.cancel()
        let leftovers = try daemon.writeTemporaries()
        #expect(leftovers.isEmpty, "temporary files left: \(leftovers)")
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(await EndToEnd.failure { _ = try await handle.size() } == .daemonUnavailable)
    }
}

/// `count` chunks of `size` bytes; `beforeChunk(index)` runs as each is
/// asked for, before it is given.
struct ObservedChunks: AsyncSequence {
    typealias Element = [UInt8]
    let count: Int
    let size: Int
    let beforeChunk: @Sendable (Int) -> Void

    struct AsyncIterator: AsyncIteratorProtocol {
        var index = 0
        let chunks: ObservedChunks
        mutating func next() async -> [UInt8]? {
            guard index < chunks.count else { return nil }
            chunks.beforeChunk(index)
            defer { index += 1 }
            return [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: chunks.size)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunks: self) }
}
