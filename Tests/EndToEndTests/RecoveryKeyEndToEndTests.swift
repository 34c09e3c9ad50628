import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Issue #36 item 1 against the real daemon: a recovery key made with the
/// passcode sets a new one when it is forgotten, and nothing else ever
/// shows it.
@Suite("Recovery key", .serialized)
struct RecoveryKeyEndToEndTests {
    static let protctl = CommandRunner.builtProduct("protctl")

    private func run(_ daemon: DaemonProcess, _ arguments: [String], input: String? = nil) throws -> CommandResult {
        try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath] + arguments, input: input.map { Array($0.utf8) })
    }

    /// Writes a file named after each class, in that class.
    private func writeEveryClass(_ client: DataProtectionClient) async throws {
        for protection in FileProtection.allCases {
            try await client.file("\(protection)").write(Array("\(protection)".utf8), protection: protection)
        }
    }

    private func expectEveryClass(_ client: DataProtectionClient) async throws {
        for protection in FileProtection.allCases {
            #expect(try await client.file("\(protection)").read() == Array("\(protection)".utf8), "\(protection)")
        }
    }

    /// A daemon with the passcode, a file in every class and a recovery
    /// key, restarted: the passcode is now forgotten.
    private func forgottenPasscode() async throws -> (DaemonProcess, DataProtectionClient, RecoveryKey) {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode()
        try await client.unlock(passcode: EndToEnd.passcode)
        try await writeEveryClass(client)
        #expect(try await client.status().recoveryKeySet == false)
        let key = try await client.createRecoveryKey(passcode: EndToEnd.passcode)
        #expect(try await client.status().recoveryKeySet)
        await client.close()
        try daemon.restart()
        return (daemon, try await DataProtectionClient.connect(socketPath: daemon.socketPath), key)
    }

    private static func randomKey() throws -> RecoveryKey {
        try RecoveryKey(bytes: (0..<RecoveryKey.byteCount).map { _ in UInt8.random(in: 0...255) })
    }

    @Test("create, forget the passcode, reset with the recovery key: every class reads, now and after unlock with the new passcode")
    func resetForgottenPasscode() async throws {
        let (daemon, client, key) = try await forgottenPasscode()
        #expect(try await client.status().state == .beforeFirstUnlock)
        try await client.resetPasscode(recoveryKey: key, newPasscode: "a new one")
        #expect(try await client.status().state == .unlocked)
        try await expectEveryClass(client)
        await client.close()

        try daemon.restart()
        let again = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(await EndToEnd.failure { try await again.unlock(passcode: EndToEnd.passcode) } == .wrongPasscode)
        try await again.unlock(passcode: "a new one")
        try await expectEveryClass(again)
        #expect(try await again.status().recoveryKeySet, "the recovery key stays valid after a reset")
    }

    @Test("a wrong recovery key is a failed attempt on unlock's schedule and record, rate limited across a restart")
    func wrongKeysAreCounted() async throws {
        let (daemon, client, key) = try await forgottenPasscode()
        for _ in 1...3 {
            #expect(await EndToEnd.failure { try await client.unlock(passcode: "not it") } == .wrongPasscode)
        }
        for _ in 1...2 {
            let wrong = await EndToEnd.error { try await client.resetPasscode(recoveryKey: try Self.randomKey(), newPasscode: "x") }
            #expect(wrong?.code == .wrongPasscode)
            #expect(wrong?.message.contains("wrong recovery key") == true, "\(String(describing: wrong))")
        }
        let status = try await client.status()
        #expect(status.failedAttempts == 5)
        #expect((status.retryAfter ?? .zero) > .seconds(50))
        #expect(await EndToEnd.failure { try await client.resetPasscode(recoveryKey: key, newPasscode: "x") } == .rateLimited)
        await client.close()

        try daemon.restart()
        let again = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(await EndToEnd.failure { try await again.resetPasscode(recoveryKey: key, newPasscode: "x") } == .rateLimited)
        #expect(await EndToEnd.failure { try await again.unlock(passcode: EndToEnd.passcode) } == .rateLimited)
        #expect(try await again.status().failedAttempts == 5)
    }

    @Test("remove, and erase, make a reset impossible; creating again replaces the key")
    func removeAndErase() async throws {
        let (daemon, client, first) = try await forgottenPasscode()
        try await client.unlock(passcode: EndToEnd.passcode)
        let second = try await client.createRecoveryKey(passcode: EndToEnd.passcode)
        #expect(second != first)
        #expect(await EndToEnd.failure { try await client.resetPasscode(recoveryKey: first, newPasscode: "x") } == .wrongPasscode)
        try await client.removeRecoveryKey()
        #expect(try await client.status().recoveryKeySet == false)
        #expect(await EndToEnd.failure { try await client.resetPasscode(recoveryKey: second, newPasscode: "x") } == .notFound)
        #expect(try await client.status().failedAttempts == 1, "only the wrong key counted")
        try await client.removeRecoveryKey()

        let third = try await client.createRecoveryKey(passcode: EndToEnd.passcode)
        try await client.erase()
        let erased = try await client.status()
        #expect(!erased.recoveryKeySet && !erased.passcodeSet)
        #expect(await EndToEnd.failure { try await client.resetPasscode(recoveryKey: third, newPasscode: "x") } == .notFound)
        #expect(await EndToEnd.failure { _ = try await client.createRecoveryKey(passcode: "any") } == .noPasscodeSet)
        withExtendedLifetime(daemon) {}
    }

    @Test("wrong recovery keys up to erase-after-N erase everything, as wrong passcodes do")
    func eraseAfterWrongKeys() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, extraArguments: ["--passcode-erase-after-failed-attempts", "2"])
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.setPasscode(EndToEnd.passcode)
        try await writeEveryClass(client)
        _ = try await client.createRecoveryKey(passcode: EndToEnd.passcode)
        #expect(await EndToEnd.failure { try await client.resetPasscode(recoveryKey: try Self.randomKey(), newPasscode: "x") }
                == .wrongPasscode)
        #expect(await EndToEnd.failure { try await client.resetPasscode(recoveryKey: try Self.randomKey(), newPasscode: "x") }
                == .erasedAfterFailedAttempts)
        let status = try await client.status()
        #expect(!status.passcodeSet && !status.recoveryKeySet && status.state == .unlocked)
        #expect(try await client.list().isEmpty)
        #expect(daemon.log.contains("every key was erased after too many failed attempts"))
    }

    @Test("changing the passcode keeps the recovery key working")
    func passwdKeepsRecovery() async throws {
        let (daemon, client, key) = try await forgottenPasscode()
        try await client.setPasscode("changed", old: EndToEnd.passcode)
        #expect(try await client.status().recoveryKeySet)
        await client.close()
        try daemon.restart()
        let again = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await again.resetPasscode(recoveryKey: key, newPasscode: "after passwd")
        try await expectEveryClass(again)
    }

    @Test("the recovery key is in the answer that makes it and nowhere else: no other answer, event or log line")
    func neverShownAgain() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, logLevel: "trace")
        #expect(try run(daemon, ["passwd", "--stdin"], input: "first\n").status == 0)

        let raw = try RawConnection(path: daemon.socketPath)
        defer { raw.close() }
        try raw.handshake()
        try raw.send(type: 0x17, id: 2, body: [])  // subscribe: events come on this connection too
        var frames = [try #require(try raw.readFrame())]
        try raw.send(type: 0x1C, id: 3, body: Self.bytesField(Array("first".utf8)))
        let created = try #require(try raw.readFrame())
        #expect(created.type == 0x8C && created.id == 3 && created.body.count == 32)
        let key = try RecoveryKey(bytes: created.body)

        // Everything that touches the key or the state afterwards, a wrong key included.
        try raw.send(type: 0x1E, id: 4, body: try Self.randomKey().bytes + Self.bytesField(Array("x".utf8)))
        try raw.send(type: 0x03, id: 5, body: [2, 0, 0, 0, 0, 1])  // lock, waiting, reason "requested"
        try raw.send(type: 0x1E, id: 6, body: key.bytes + Self.bytesField(Array("second".utf8)))
        try raw.send(type: 0x02, id: 7, body: [])
        try raw.send(type: 0x1D, id: 8, body: [])
        try raw.send(type: 0x02, id: 9, body: [])
        while frames.filter({ $0.id == 9 }).isEmpty, let frame = try raw.readFrame() { frames.append(frame) }
        #expect(frames.contains { $0.id == 6 && $0.type == 0x80 }, "the reset succeeded")
        #expect(frames.contains { $0.type == 0xC0 }, "events were seen")
        for frame in frames {
            #expect(!Self.contains(frame.body, anyEightBytesOf: key.bytes), "frame type \(frame.type) id \(frame.id)")
        }

        // protctl: the one answer shows it, nothing after does.
        let made = try run(daemon, ["--json", "recovery", "create", "--stdin"], input: "second\n")
        #expect(made.status == 0, "\(made.stderr)")
        let text = try #require(made.json?["recoveryKey"] as? String)
        let second = try RecoveryKey(text: text)
        let afterwards = [try run(daemon, ["--json", "status"]), try run(daemon, ["status"]),
                          try run(daemon, ["recovery", "reset-passcode", "--stdin"], input: text + "\nthird\n"),
                          try run(daemon, ["recovery", "reset-passcode", "--stdin"], input: "\(try Self.randomKey().text)\nx\n")]
        #expect(afterwards[2].status == 0 && afterwards[3].status == 77, "\(afterwards[3].stderr)")

        let log = daemon.log
        #expect(log.contains("recovery key created") && log.contains("passcode reset with the recovery key failed"))
        for key in [key, second] {
            let hex = key.bytes.map { String(format: "%02x", $0) }.joined()
            for shown in [log] + afterwards.flatMap({ [$0.stdout, $0.stderr] }) {
                #expect(!shown.lowercased().contains(hex), "the key's hex was shown")
                for group in key.text.split(separator: "-") {
                    #expect(!shown.uppercased().contains(group), "a group of the key's text was shown")
                }
                #expect(!shown.contains("\(key.bytes.prefix(8).map(String.init).joined(separator: ", "))"))
            }
        }
    }

    @Test("protctl recovery: create, status, reset with exit codes for a typo, a wrong key and no key, remove")
    func protctlVerbs() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try run(daemon, ["recovery", "create", "--stdin"], input: "x\n").status == 64, "no passcode yet")
        #expect(try run(daemon, ["passwd", "--stdin"], input: "first\n").status == 0)
        #expect(try run(daemon, ["recovery", "create", "--stdin"], input: "wrong\n").status == 77)
        let made = try run(daemon, ["recovery", "create", "--stdin"], input: "first\n")
        #expect(made.status == 0, "\(made.stderr)")
        let line = try #require(made.stdout.split(separator: "\n").first { $0.hasPrefix("recovery key: ") })
        let text = String(line.dropFirst("recovery key: ".count))
        #expect(made.stdout.contains("offline"))
        #expect(try run(daemon, ["status"]).stdout.contains("recovery key: set"))
        #expect(try run(daemon, ["--json", "status"]).json?["recoveryKeySet"] as? Bool == true)

        var typo = Array(text)
        typo[10] = typo[10] == "A" ? "B" : "A"
        let refused = try run(daemon, ["recovery", "reset-passcode", "--stdin"], input: String(typo) + "\nnew\n")
        #expect(refused.status == 64 && refused.stderr.contains("group 2 "), "\(refused.stderr)")
        try daemon.restart()
        let reset = try run(daemon, ["--json", "recovery", "reset-passcode", "--stdin"],
                            input: text.lowercased().replacingOccurrences(of: "-", with: " ") + "\nnew\n")
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(reset.json?["state"] as? String == "unlocked")
        #expect(try run(daemon, ["unlock", "--stdin"], input: "new\n").status == 0)

        #expect(try run(daemon, ["recovery", "remove"]).status == 64, "needs --yes")
        let removed = try run(daemon, ["recovery", "remove", "--yes"])
        #expect(removed.status == 0 && removed.stdout.contains("recovery key removed"))
        #expect(try run(daemon, ["status"]).stdout.contains("recovery key: not set"))
        #expect(try run(daemon, ["recovery", "reset-passcode", "--stdin"], input: text + "\nnewer\n").status == 66)
    }

    @Test("only root and the admin group make or remove a recovery key; anyone with it may reset",
          .enabled(if: getuid() == 0, "needs root to run a client under another uid (setpriv)"))
    func whoMay() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, socketMode: "0666")
        #expect(try run(daemon, ["passwd", "--stdin"], input: "first\n").status == 0)
        #expect(try EndToEnd.protctlAsOtherUser(daemon, ["recovery", "create", "--stdin"], input: "first\n").status == 77)
        let made = try run(daemon, ["--json", "recovery", "create", "--stdin"], input: "first\n")
        let text = try #require(made.json?["recoveryKey"] as? String)
        #expect(try EndToEnd.protctlAsOtherUser(daemon, ["recovery", "remove", "--yes"]).status == 77)
        let reset = try EndToEnd.protctlAsOtherUser(daemon, ["recovery", "reset-passcode", "--stdin"], input: text + "\nnew\n")
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(try run(daemon, ["unlock", "--stdin"], input: "new\n").status == 0)
    }

    /// A `bytes` field: u32 length, then the bytes.
    private static func bytesField(_ bytes: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian, Array.init) + bytes
    }

    /// Whether `haystack` holds any 8 consecutive bytes of `key`.
    private static func contains(_ haystack: [UInt8], anyEightBytesOf key: [UInt8]) -> Bool {
        guard haystack.count >= 8 else { return false }
        let pieces = Set((0...key.count - 8).map { Array(key[$0..<$0 + 8]) })
        return (0...haystack.count - 8).contains { pieces.contains(Array(haystack[$0..<$0 + 8])) }
    }
}
