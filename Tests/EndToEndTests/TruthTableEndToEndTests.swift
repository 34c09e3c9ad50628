import DataProtection
import ProtectionTestSupport
import Testing

/// The protection model's truth table through the real daemon and client.
@Suite("Protection classes through the daemon", .serialized)
struct TruthTableEndToEndTests {
    @Test("before first unlock only class D reads, and class B can be created but not read")
    func beforeFirstUnlock() async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode()
        defer { _ = daemon }
        #expect(try await client.status().state == .beforeFirstUnlock)
        #expect(try await !client.isProtectedDataAvailable)
        try await client.file("d").write(Array("d".utf8), protection: .none)
        #expect(try await client.file("d").read() == Array("d".utf8))
        try await client.file("b").write(Array("b".utf8), protection: .completeUnlessOpen)
        #expect(await EndToEnd.failure { _ = try await client.file("b").read() } == .protectedDataUnavailable)
        for protection: FileProtection in [.complete, .completeUntilFirstUserAuthentication] {
            #expect(await EndToEnd.failure { try await client.file("x").write([1], protection: protection) }
                    == .protectedDataUnavailable)
        }
        // list, stat and delete work in every state.
        #expect(try await client.list().map(\.name) == ["b", "d"])
        #expect(try await client.file("b").attributes.protection == .completeUnlessOpen)
        try await client.file("d").delete()
        #expect(await EndToEnd.failure { _ = try await client.file("d").read() } == .notFound)
        // Data is already unavailable, so a lock that waits for that succeeds, as in `locked`.
        try await client.lock(waitUntilLocked: true)
        #expect(try await client.status().state == .beforeFirstUnlock)
    }

    @Test("after unlock every class reads and writes; a lock with grace keeps class A until the deadline")
    func unlockThenLockWithGrace() async throws {
        // 3 s of grace: the reads below must fit in it while the other
        // suites load both cores (1 s fell short once in eight runs).
        let (daemon, client) = try await EndToEnd.daemonWithPasscode(grace: 3)
        defer { _ = daemon }
        try await client.unlock(passcode: EndToEnd.passcode)
        for protection in FileProtection.allCases {
            try await client.file("f-\(protection)").write(Array("\(protection)".utf8), protection: protection)
            #expect(try await client.file("f-\(protection)").read() == Array("\(protection)".utf8))
        }
        let aHandle = try await client.file("f-complete").open()
        let bHandle = try await client.file("f-completeUnlessOpen").open()
        // Someone else subscribes and does not acknowledge, so the grace period runs.
        let watcher = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        _ = try await watcher.subscribe()
        try await client.lock(grace: .seconds(3), waitUntilLocked: false)
        #expect(try await client.status().state == .locking)
        #expect(try await client.file("f-complete").read() == Array("complete".utf8))
        #expect(try await aHandle.size() == 8)
        #expect(try await EndToEnd.eventually { try await client.status().state == .locked })

        // Locked: A gone, B readable through its open handle only, C and D fine.
        #expect(await EndToEnd.failure { _ = try await aHandle.read(offset: 0, count: 4) } == .protectedDataUnavailable)
        #expect(await EndToEnd.failure { _ = try await client.file("f-complete").read() } == .protectedDataUnavailable)
        #expect(try await bHandle.read(offset: 0, count: 8) == Array("complete".utf8))
        _ = try await bHandle.append(Array("!".utf8))
        #expect(await EndToEnd.failure { _ = try await client.file("f-completeUnlessOpen").read() }
                == .protectedDataUnavailable)
        #expect(try await client.file("f-completeUntilFirstUserAuthentication").read()
                == Array("completeUntilFirstUserAuthentication".utf8))
        #expect(try await client.file("f-none").read() == Array("none".utf8))
        await watcher.close()
    }

    @Test("a zero-grace lock is immediate; class B created while locked reads after unlock; class C survives lock but not restart")
    func zeroGraceAndRestart() async throws {
        let (daemon, first) = try await EndToEnd.daemonWithPasscode()
        try await first.unlock(passcode: EndToEnd.passcode)
        try await first.file("c").write(Array("c".utf8))
        try await first.lock(grace: .zero)
        #expect(try await first.status().state == .locked)
        #expect(try await first.file("c").read() == Array("c".utf8))

        let created = try await first.file("b-new").open(.create(.completeUnlessOpen))
        _ = try await created.append(Array("made while locked".utf8))
        #expect(try await created.read(offset: 0, count: 4) == Array("made".utf8))
        await created.close()
        #expect(await EndToEnd.failure { _ = try await first.file("b-new").read() } == .protectedDataUnavailable)
        try await first.unlock(passcode: EndToEnd.passcode)
        #expect(try await first.file("b-new").read() == Array("made while locked".utf8))
        await first.close()

        try daemon.restart()
        let second = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await second.status().state == .beforeFirstUnlock)
        #expect(await EndToEnd.failure { _ = try await second.file("c").read() } == .protectedDataUnavailable)
        try await second.unlock(passcode: EndToEnd.passcode)
        #expect(try await second.file("c").read() == Array("c".utf8))
    }

    @Test("changing a file's class through the client rewraps it and keeps its content")
    func changeProtection() async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode()
        defer { _ = daemon }
        try await client.unlock(passcode: EndToEnd.passcode)
        let file = client.file("notes/today.txt")
        try await file.write(Array("hello".utf8))
        #expect(try await file.protection == .completeUntilFirstUserAuthentication)
        try await file.setProtection(.complete)
        #expect(try await file.protection == .complete)
        try await client.lock(grace: .zero)
        #expect(await EndToEnd.failure { _ = try await file.read() } == .protectedDataUnavailable)
        try await client.unlock(passcode: EndToEnd.passcode)
        #expect(try await file.read() == Array("hello".utf8))
    }

    @Test("bad names are refused with invalidName")
    func badNames() async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode()
        defer { _ = daemon }
        for name in ["../escape", "/etc/passwd", "a//b", "", "x/./y"] {
            #expect(await EndToEnd.failure { try await client.file(name).write([1], protection: .none) } == .invalidName)
        }
    }
}
