import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// `lock.first-unlock-timeout` through the real daemon, set to seconds.
@Suite("Back to beforeFirstUnlock after the first-unlock timeout", .serialized)
struct FirstUnlockTimeoutEndToEndTests {
    private static func content(_ protection: FileProtection) -> [UInt8] { Array("content of \(protection)".utf8) }

    /// A daemon with a 30 s grace and `timeout`, holding one file per
    /// class, before first unlock. The files are written before the
    /// passcode is set, so no write (and its fsync) races the timeout.
    private static func daemonWithFiles(timeout: String) async throws -> (DaemonProcess, DataProtectionClient) {
        try await EndToEnd.daemonWithPasscode(grace: 30, firstUnlockTimeout: timeout) { setup in
            for protection in FileProtection.allCases {
                try await setup.file("f-\(protection)").write(content(protection), protection: protection)
            }
        }
    }

    @Test("after the timeout classes A, C and existing B are unavailable, D reads and B can be created; the events say inactivity; an unlock brings all back")
    func timeoutFromUnlocked() async throws {
        // The watcher's acknowledgement ends the 30 s grace early.
        let (daemon, client) = try await Self.daemonWithFiles(timeout: "5")
        defer { _ = daemon }
        let before = try await client.status()
        #expect(before.firstUnlockTimeout == .seconds(5))
        #expect(before.firstUnlockTimeoutRemaining == nil, "nothing to time out before the first unlock")
        let watcher = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        _ = try await watcher.subscribe()
        let events = EndToEnd.collect(watcher, count: 4, acknowledge: true)
        try await client.unlock(passcode: EndToEnd.passcode)
        var handles: [FileProtection: ProtectedFile.Handle] = [:]
        for protection in FileProtection.allCases {
            handles[protection] = try await client.file("f-\(protection)").open()
        }
        // The timeout counts from the last unlock: this one.
        let unlocked = ContinuousClock.now
        try await client.unlock(passcode: EndToEnd.passcode)
        let remaining = try #require(try await client.status().firstUnlockTimeoutRemaining)
        #expect(remaining > .zero && remaining <= .seconds(5))

        #expect(try await EndToEnd.eventually(timeout: .seconds(20)) { try await client.status().state == .beforeFirstUnlock },
                "the grace is 30 s: beforeFirstUnlock within 20 s means the acknowledgement ended it")
        #expect(ContinuousClock.now - unlocked >= .seconds(5), "the timeout passed early")
        #expect(try await client.status().firstUnlockTimeoutRemaining == nil)

        for protection: FileProtection in [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication] {
            #expect(await EndToEnd.failure { _ = try await client.file("f-\(protection)").read() } == .protectedDataUnavailable,
                    "existing \(protection) file")
        }
        #expect(try await client.file("f-none").read() == Self.content(.none))
        try await client.file("new-b").write(Array("made after".utf8), protection: .completeUnlessOpen)
        for protection: FileProtection in [.complete, .completeUntilFirstUserAuthentication] {
            #expect(await EndToEnd.failure { try await client.file("new").write([1], protection: protection) }
                    == .protectedDataUnavailable, "new \(protection) file")
        }
        // Handles: A and C were invalidated; B keeps its file key, as at a lock.
        for protection: FileProtection in [.complete, .completeUntilFirstUserAuthentication] {
            #expect(await EndToEnd.failure { _ = try await handles[protection]!.read(offset: 0, count: 4) }
                    == .protectedDataUnavailable, "\(protection) handle")
        }
        #expect(try await handles[.completeUnlessOpen]!.read(offset: 0, count: 7) == Array("content".utf8))
        #expect(try await handles[.none]!.read(offset: 0, count: 7) == Array("content".utf8))

        try await client.unlock(passcode: EndToEnd.passcode)
        for protection in FileProtection.allCases {
            #expect(try await client.file("f-\(protection)").read() == Self.content(protection))
        }
        #expect(try await client.file("new-b").read() == Array("made after".utf8))
        #expect(try await client.status().firstUnlockTimeoutRemaining != nil)

        // The first unlock's event, then the timeout's two, then the last unlock's.
        let seen = try await events.value
        try #require(seen.count == 4, "\(seen)")
        #expect(seen[0].kind == .didBecomeAvailable(firstUnlock: true))
        if case .willBecomeUnavailable = seen[1].kind {} else { Issue.record("second event was \(seen[1])") }
        #expect(seen[2].kind == .didBecomeUnavailable)
        #expect(seen[3].kind == .didBecomeAvailable(firstUnlock: true))
        #expect(seen.map(\.state) == [.unlocked, .locking, .beforeFirstUnlock, .unlocked])
        #expect(seen.map(\.reason) == [nil, .inactivity, .inactivity, nil])
        #expect(seen.map(\.sequence) == (0..<4).map { seen[0].sequence + UInt64($0) })
        for handle in handles.values { await handle.close() }
        await watcher.close()
    }

    @Test("already locked when it passes, protd still goes to beforeFirstUnlock and wipes class C; watch --json prints the reasons")
    func timeoutFromLocked() async throws {
        let (daemon, client) = try await Self.daemonWithFiles(timeout: "3")
        defer { _ = daemon }
        let (watcher, stdout, _) = ProtctlCommand.process(daemon, ["--json", "watch", "--count", "5", "--ack"])
        try watcher.run()
        let reader = stdout.fileHandleForReading
        // The first line says the watcher is subscribed.
        let buffered = ProtctlCommand.readFirstLine(reader)
        #expect(ProtctlCommand.jsonLines(buffered).first?["subscribed"] as? Bool == true)
        let classC = client.file("f-completeUntilFirstUserAuthentication")
        try await client.unlock(passcode: EndToEnd.passcode)
        try await client.lock(grace: .zero)
        #expect(try await classC.read() == Self.content(.completeUntilFirstUserAuthentication), "class C stays through a lock")
        #expect(try await EndToEnd.eventually(timeout: .seconds(20)) { try await client.status().state == .beforeFirstUnlock })
        #expect(await EndToEnd.failure { _ = try await classC.read() } == .protectedDataUnavailable)

        watcher.waitUntilExit()
        #expect(watcher.terminationStatus == 0)
        let lines = ProtctlCommand.jsonLines(buffered + reader.readDataToEndOfFile()).dropFirst()
        #expect(lines.compactMap { $0["event"] as? String } == [
            "protectedDataDidBecomeAvailable",
            "protectedDataWillBecomeUnavailable", "protectedDataDidBecomeUnavailable",
            "protectedDataWillBecomeUnavailable", "protectedDataDidBecomeUnavailable",
        ])
        #expect(lines.map { $0["reason"] as? String } == [nil, "requested", "requested", "inactivity", "inactivity"])
        #expect(lines.compactMap { $0["state"] as? String } == ["unlocked", "locking", "locked", "locked", "beforeFirstUnlock"])
    }

    @Test("protctl status shows the first-unlock timeout: not running before the first unlock, the time left after it, off at 0")
    func statusShowsTimeout() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, firstUnlockTimeout: "1h")
        #expect(try ProtctlCommand.run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        try daemon.restart()
        let before = try ProtctlCommand.run(daemon, ["--json", "status"]).json
        #expect(before?["firstUnlockTimeoutSeconds"] as? Double == 3600)
        #expect(before?["firstUnlockTimeoutRemainingSeconds"] is NSNull)
        #expect(try ProtctlCommand.run(daemon, ["status"]).stdout.contains("first-unlock timeout: 1h 00m, not running\n"))
        #expect(try ProtctlCommand.run(daemon, ["unlock", "--stdin"], input: "pass").status == 0)
        let remaining = try #require(try ProtctlCommand.run(daemon, ["--json", "status"]).json?["firstUnlockTimeoutRemainingSeconds"] as? Double)
        #expect(remaining > 3000 && remaining <= 3600)
        #expect(try ProtctlCommand.run(daemon, ["status"]).stdout.contains("first-unlock timeout: 1h 00m, beforeFirstUnlock in 59m "))

        let off = try DaemonProcess(gracePeriodSeconds: 0, firstUnlockTimeout: "0")
        #expect(try ProtctlCommand.run(off, ["passwd", "--stdin"], input: "pass").status == 0)
        #expect(try ProtctlCommand.run(off, ["--json", "status"]).json?["firstUnlockTimeoutSeconds"] is NSNull)
        #expect(try ProtctlCommand.run(off, ["status"]).stdout.contains("first-unlock timeout: off\n"))
    }

    @Test("the first passcode set on a running daemon starts the first-unlock timeout")
    func firstPasscodeStartsTheTimeout() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, firstUnlockTimeout: "2")
        let passwd = try ProtctlCommand.run(daemon, ["passwd", "--stdin"], input: "first passcode")
        #expect(passwd.status == 0, "\(passwd.stderr)")
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let deadline = ContinuousClock.now + .seconds(10)
        while try await client.status().state != .beforeFirstUnlock, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await client.status().state == .beforeFirstUnlock)
        await client.close()
    }
}
