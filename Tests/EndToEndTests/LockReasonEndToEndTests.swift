import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Lock events say why: a lock's own reason, and protd's when it stops.
@Suite("Lock events say why", .serialized)
struct LockReasonEndToEndTests {
    @Test("protctl lock --reason suspend and a plain protctl lock show as suspend and requested in watch --json")
    func requestedAndSuspend() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 30)
        #expect(try ProtctlCommand.run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        let (watcher, stdout, _) = ProtctlCommand.process(daemon, ["--json", "watch", "--count", "5", "--ack"])
        try watcher.run()
        let reader = stdout.fileHandleForReading
        // The first line says the watcher is subscribed; the locks wait for its acknowledgement.
        let buffered = ProtctlCommand.readFirstLine(reader)
        #expect(try ProtctlCommand.run(daemon, ["lock", "--reason", "suspend"]).status == 0)
        #expect(try ProtctlCommand.run(daemon, ["unlock", "--stdin"], input: "pass").status == 0)
        #expect(try ProtctlCommand.run(daemon, ["lock"]).status == 0)
        watcher.waitUntilExit()
        #expect(watcher.terminationStatus == 0)
        let lines = ProtctlCommand.jsonLines(buffered + reader.readDataToEndOfFile()).dropFirst()
        #expect(lines.compactMap { $0["event"] as? String } == [
            "protectedDataWillBecomeUnavailable", "protectedDataDidBecomeUnavailable", "protectedDataDidBecomeAvailable",
            "protectedDataWillBecomeUnavailable", "protectedDataDidBecomeUnavailable",
        ])
        #expect(lines.map { $0["reason"] as? String } == ["suspend", "suspend", nil, "requested", "requested"])
    }

    @Test("lock --reason takes requested or suspend; inactivity, shutdown or anything else is a usage error (64) that does not lock",
          arguments: ["inactivity", "shutdown", "sleep"])
    func reasonsProtdKeeps(reason: String) throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try ProtctlCommand.run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        let refused = try ProtctlCommand.run(daemon, ["lock", "--reason", reason])
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("--reason"), "\(refused.stderr)")
        #expect(try ProtctlCommand.run(daemon, ["--json", "status"]).json?["state"] as? String == "unlocked")
    }

    @Test("on the wire a lock's unknown reason byte is a protocol error; inactivity and shutdown are invalidArgument")
    func reasonOnTheWire() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try ProtctlCommand.run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        let lock: UInt8 = 0x03, error: UInt8 = 0x8F
        // flags 1 (grace given), grace 0 ms, then the reason byte.
        func lockBody(reason: UInt8) -> [UInt8] { [1, 0, 0, 0, 0, reason] }
        let raw = try RawConnection(path: daemon.socketPath)
        defer { raw.close() }
        try raw.handshake()
        for (id, reason) in [(UInt32(2), UInt8(2)), (3, 4)] {
            try raw.send(type: lock, id: id, body: lockBody(reason: reason))
            let answer = try #require(try raw.readFrame())
            #expect(answer.type == error && answer.id == id)
            #expect(Array(answer.body.prefix(2)) == [0, 10], "expected invalidArgument for reason \(reason)")
        }
        #expect(try ProtctlCommand.run(daemon, ["--json", "status"]).json?["state"] as? String == "unlocked")
        try raw.send(type: lock, id: 4, body: lockBody(reason: 9))
        let violation = try #require(try raw.readFrame())
        #expect(violation.type == error && violation.id == 0)
        #expect(Array(violation.body.prefix(2)) == [0, 15], "expected protocolError")
        #expect(raw.readsEndOfStream())
    }

    @Test("a hello that offers only version 2 is refused with unsupportedVersion")
    func versionTwoRefused() throws {
        let daemon = try DaemonProcess()
        let raw = try RawConnection(path: daemon.socketPath)
        defer { raw.close() }
        try raw.send(type: 0x01, id: 1, body: [0, 2, 0, 2, 0, 3] + Array("old".utf8))
        let answer = try #require(try raw.readFrame())
        #expect(answer.type == 0x8F && answer.id == 1)
        #expect(Array(answer.body.prefix(2)) == [0, 16], "expected unsupportedVersion")
        #expect(raw.readsEndOfStream())
    }

    @Test("SIGTERM tells subscribers, from unlocked or locked: will- and didBecomeUnavailable with reason shutdown, then the connection ends",
          arguments: [false, true])
    func shutdownEvents(lockedFirst: Bool) async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode(grace: 30)
        try await client.unlock(passcode: EndToEnd.passcode)
        if lockedFirst { try await client.lock(grace: .zero) }
        let watcher = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        _ = try await watcher.subscribe()
        // Not acknowledging: the shutdown must not wait for the 30 s grace.
        let events = EndToEnd.collect(watcher, count: 10, acknowledge: false)
        let stopped = try #require(daemon.stop())
        #expect(stopped.status == 0)
        #expect(stopped.seconds < 10, "the stop took \(stopped.seconds) s")
        let seen = try await events.value
        try #require(seen.count == 2, "\(seen)")
        if case .willBecomeUnavailable = seen[0].kind {} else { Issue.record("first event was \(seen[0])") }
        #expect(seen[1].kind == .didBecomeUnavailable)
        #expect(seen.map(\.reason) == [.shutdown, .shutdown])
        #expect(seen.map(\.state) == [lockedFirst ? .locked : .locking, .beforeFirstUnlock])
        await watcher.close()
        await client.close()
    }

    @Test("a daemon without a passcode, or before first unlock, stops without events")
    func shutdownWithoutEvents() async throws {
        for withPasscode in [false, true] {
            let daemon: DaemonProcess
            if withPasscode {
                (daemon, _) = try await EndToEnd.daemonWithPasscode()
            } else {
                daemon = try DaemonProcess()
            }
            let watcher = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            _ = try await watcher.subscribe()
            let events = EndToEnd.collect(watcher, count: 10, acknowledge: false)
            daemon.stop()
            #expect(try await events.value.isEmpty, withPasscode ? "before first unlock" : "no passcode")
            await watcher.close()
        }
    }
}
