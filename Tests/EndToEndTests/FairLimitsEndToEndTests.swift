import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Limits per uid and the connections kept for administrators, against
/// the real daemon: one uid cannot take what the others need.
@Suite("Fair limits per uid", .serialized)
struct FairLimitsEndToEndTests {
    static let protctl = CommandRunner.builtProduct("protctl")
    static let isRoot = getuid() == 0

    /// protctl as `uid` (and its gid), with no supplementary groups.
    private func protctl(as uid: UInt32? = nil, _ daemon: DaemonProcess, _ arguments: [String]) throws -> CommandResult {
        let command = [Self.protctl, "--socket", daemon.socketPath] + arguments
        guard let uid else { return try CommandRunner.run(command[0], Array(command.dropFirst())) }
        return try CommandRunner.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + command)
    }

    /// protd-client-probe `hold` as uid 4242: `count` connections, each
    /// listing its files; those served stay open until `release()`.
    private final class HeldConnections {
        private let process = Process()
        private let input = Pipe()
        /// How many connections the daemon served.
        let held: Int

        init(_ daemon: DaemonProcess, uid: UInt32, count: Int) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                                 CommandRunner.builtProduct("protd-client-probe"), "hold", daemon.socketPath, "\(count)"]
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let more = output.fileHandleForReading.availableData
                if more.isEmpty { break }
                line += more
            }
            let text = String(decoding: line, as: UTF8.self)
            held = text.split(separator: " ").first.flatMap { Int($0.dropFirst("held=".count)) } ?? -1
        }

        /// Closes the connections and waits for the probe to exit.
        func release() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }

        deinit { release() }
    }

    @Test("1,000 connections from one ordinary uid get its 64, and another uid and an administrator still get through",
          .enabled(if: isRoot, "needs root to connect as other uids (setpriv)"), .timeLimit(.minutes(2)))
    func oneUIDCannotTakeEveryConnection() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, socketMode: "0666")
        let admin = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await admin.setPasscode("pass")
        await admin.close()
        let flood = try HeldConnections(daemon, uid: 4242, count: 1000)
        defer { flood.release() }
        #expect(flood.held == 64, "limits.max-connections-per-uid")
        let other = try protctl(as: 4243, daemon, ["status"])
        #expect(other.status == 0, "\(other.stderr)")
        let refused = try protctl(as: 4242, daemon, ["status"])
        #expect(refused.status == 69)
        #expect(refused.stderr.contains("limits.max-connections-per-uid"), "\(refused.stderr)")
        #expect(try protctl(daemon, ["status"]).status == 0)
        let lock = try protctl(daemon, ["lock"])
        #expect(lock.status == 0, "\(lock.stderr)")
        #expect(try protctl(daemon, ["--json", "status"]).json?["state"] as? String == "locked")
    }

    @Test("an administrator's own 1,000 connections doing file work leave it the kept slots for status, lock and unlock")
    func administratorCannotUseUpTheKeptSlots() async throws {
        // The test's uid is the daemon's: an administrator.
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let setup = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await setup.setPasscode("pass")
        await setup.close()
        var held: [DataProtectionClient] = []
        var closedOnKeptSlot = 0
        for _ in 0..<1000 {
            guard let client = try? await DataProtectionClient.connect(socketPath: daemon.socketPath) else { continue }
            do {
                _ = try await client.list()
                held.append(client)
            } catch {
                #expect(error.code == .tooManyConnections)
                if closedOnKeptSlot == 0 { #expect("\(error)".contains("kept for administrators"), "\(error)") }
                closedOnKeptSlot += 1
                await client.close()
            }
        }
        #expect(held.count == 64, "limits.max-connections-per-uid")
        #expect(closedOnKeptSlot > 0)
        #expect(try protctl(daemon, ["status"]).status == 0)
        #expect(try protctl(daemon, ["lock"]).status == 0)
        let unlock = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "unlock", "--stdin"],
                                           input: Array("pass\n".utf8))
        #expect(unlock.status == 0, "\(unlock.stderr)")
        for client in held { await client.close() }
    }

    @Test("handles and writes in progress are limited per uid over all its connections, and given back on close")
    func handlesPerUID() async throws {
        let daemon = try DaemonProcess(extraConfig: """
            limits:
              max-open-handles-per-connection: 2
              max-open-handles-per-uid: 3

            """)
        let first = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let second = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let held = [try await first.file("a").open(.create(.none)), try await first.file("b").open(.create(.none))]
        let third = try await second.file("c").open(.create(.none))
        let refused = await EndToEnd.error { _ = try await second.file("d").open(.create(.none)) }
        #expect(refused?.code == .tooManyHandles)
        #expect(refused?.message.contains("limits.max-open-handles-per-uid") == true, "\(String(describing: refused))")
        let refusedWrite = await EndToEnd.failure { _ = try await second.file("e").write([1], protection: .none) }
        #expect(refusedWrite == .tooManyHandles)
        await third.close()
        _ = try await second.file("e").write([1], protection: .none)
        // A connection's end gives back what it held.
        await first.close()
        #expect(held.count == 2)
        #expect(await EndToEnd.eventually {
            (try? await second.file("d").open(.create(.none))) != nil
        })
        await second.close()
    }

    @Test("event subscriptions are limited per uid, and given back when a subscriber leaves")
    func subscribersPerUID() async throws {
        let daemon = try DaemonProcess(extraConfig: "limits:\n  max-subscribers-per-uid: 2\n")
        var clients: [DataProtectionClient] = []
        for _ in 0..<3 { clients.append(try await DataProtectionClient.connect(socketPath: daemon.socketPath)) }
        _ = try await clients[0].subscribe()
        _ = try await clients[0].subscribe()
        _ = try await clients[1].subscribe()
        let refused = await EndToEnd.error { _ = try await clients[2].subscribe() }
        #expect(refused?.code == .tooManyHandles)
        #expect(refused?.message.contains("limits.max-subscribers-per-uid") == true, "\(String(describing: refused))")
        await clients[0].close()
        #expect(await EndToEnd.eventually { (try? await clients[2].subscribe()) != nil })
        for client in clients.dropFirst() { await client.close() }
    }

    @Test("quotas of bytes and files refuse writes, appends and creates with quotaExceeded, and lose nothing written")
    func quotas() async throws {
        let daemon = try DaemonProcess(extraConfig: """
            limits:
              quota-bytes-per-uid: 100000
              quota-files-per-uid: 3

            """)
        var client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let a = [UInt8](repeating: 1, count: 40000), b = [UInt8](repeating: 2, count: 40000)
        _ = try await client.file("a").write(a, protection: .none)
        _ = try await client.file("b").write(b)
        let tooLarge = await EndToEnd.error { _ = try await client.file("c").write([UInt8](repeating: 3, count: 30000)) }
        #expect(tooLarge?.code == .quotaExceeded)
        #expect(tooLarge?.message.contains("limits.quota-bytes-per-uid") == true, "\(String(describing: tooLarge))")
        #expect(try await client.file("c").exists == false)

        // A replacement needs room only for what it adds.
        let newA = [UInt8](repeating: 4, count: 50000)
        _ = try await client.file("a").write(newA, protection: .none)
        let handle = try await client.file("b").open()
        #expect(await EndToEnd.failure { _ = try await handle.append([UInt8](repeating: 5, count: 20000)) } == .quotaExceeded)
        #expect(try await handle.size() == 40000)
        _ = try await handle.write([9], at: 0)
        await handle.close()
        // A streamed replacement past the quota fails midway; the old content stays.
        let chunks = ObservedChunks(count: 8, size: 64 << 10) { _ in }
        #expect(await EndToEnd.failure { _ = try await client.file("a").write(contentsOf: chunks) } == .quotaExceeded)

        _ = try await client.file("c").write([UInt8](repeating: 6, count: 5000))
        let tooMany = await EndToEnd.error { _ = try await client.file("d").write([7]) }
        #expect(tooMany?.code == .quotaExceeded)
        #expect(tooMany?.message.contains("limits.quota-files-per-uid") == true, "\(String(describing: tooMany))")
        #expect(await EndToEnd.failure { _ = try await client.file("d").open(.create(.none)) } == .quotaExceeded)
        #expect(try await client.list().map(\.name) == ["a", "b", "c"])

        // After a restart the namespace is measured from its files.
        await client.close()
        try daemon.restart()
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(await EndToEnd.failure { _ = try await client.file("d").write([7]) } == .quotaExceeded)
        try await client.file("c").delete()
        _ = try await client.file("d").write([7])
        #expect(try await client.file("a").read() == newA)
        #expect(try await client.file("b").read() == [9] + b.dropFirst())
        #expect(try await client.file("d").read() == [7])
        await client.close()
    }
}
