import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// A state directory protd cannot open keeps the daemon up on its socket in
/// a fault state, instead of exiting into a restart loop that ends with
/// systemd removing the socket.
@Suite("Fault state end to end", .serialized)
struct FaultStateEndToEndTests {
    static let protctl = CommandRunner.builtProduct("protctl")

    /// A daemon with a passcode and a file, stopped, its state damaged by
    /// `damage`, started again.
    private func damagedDaemon(_ damage: (DaemonProcess) throws -> Void) async throws -> DaemonProcess {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("kept").write(Array("data".utf8), protection: .none)
        await client.close()
        daemon.stop()
        try damage(daemon)
        try daemon.start()
        return daemon
    }

    @Test("a key bag that fails authentication: status reports the fault, file requests fail with keyBagCorrupt")
    func corruptKeyBag() async throws {
        let daemon = try await damagedDaemon { daemon in
            let path = daemon.stateDirectory + "/keybag"
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            bytes[100] ^= 0x01
            try bytes.write(to: URL(fileURLWithPath: path))
        }
        defer { daemon.stop() }
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let status = try await client.status()
        let fault = try #require(status.fault)
        #expect(fault.contains("key bag failed authentication"))
        #expect(!status.isProtectedDataAvailable)
        do {
            _ = try await client.file("kept").read()
            Issue.record("a file was read in a fault state")
        } catch {
            guard case .keyBagCorrupt(let message) = error else { Issue.record("unexpected \(error)"); return }
            #expect(message.contains("fault state") && message.contains("key bag failed authentication"))
        }
        await #expect(throws: DataProtectionError.self) { try await client.unlock(passcode: "any") }
        await client.close()

        let json = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "--json", "status"])
        #expect(json.status == 0, "\(json.stderr)")
        #expect((json.json?["fault"] as? String)?.contains("key bag failed authentication") == true)
        let text = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "status"])
        #expect(text.stdout.hasPrefix("fault: key bag failed authentication"))
        let read = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "read", "kept"])
        #expect(read.status == 78, "\(read.stderr)")
        // Verbs that act on whether a passcode or recovery key is set stop with the fault: the daemon cannot know.
        for verb in [["unlock", "--stdin"], ["passwd", "--stdin"], ["recovery", "create", "--stdin"],
                     ["recovery", "remove", "--yes"], ["recovery", "reset-passcode", "--stdin"]] {
            let run = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath] + verb,
                                            input: Array("guess\nguess\n".utf8))
            #expect(run.status == 78, "\(verb): \(run.status) \(run.stdout) \(run.stderr)")
            #expect(run.stderr.contains("fault state") && run.stderr.contains("key bag failed authentication"),
                    "\(verb): \(run.stderr)")
            #expect(!run.stdout.contains("nothing to unlock"), "\(verb): \(run.stdout)")
        }
        #expect(daemon.log.components(separatedBy: "serving no files").count == 2, "logged once")
        // Still up after all that: the socket stays.
        #expect(daemon.stop()?.status == 0)
    }

    @Test("a key bag deleted while files exist is not replaced: status reports the fault, and no new key bag is made")
    func missingKeyBagBesideFiles() async throws {
        let keyBag = { (daemon: DaemonProcess) in daemon.stateDirectory + "/keybag" }
        let daemon = try await damagedDaemon { daemon in try FileManager.default.removeItem(atPath: keyBag(daemon)) }
        defer { daemon.stop() }
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let fault = try #require(try await client.status().fault)
        #expect(fault.contains("the key bag \(keyBag(daemon)) is missing") && fault.contains("restore the key bag"))
        await #expect(throws: DataProtectionError.self) { _ = try await client.file("kept").read() }
        await client.close()
        #expect(!FileManager.default.fileExists(atPath: keyBag(daemon)), "a fresh key bag replaced the lost one")
    }

    @Test("a state directory that cannot be opened: status reports the fault, requests fail with ioFailure")
    func unusableStateDirectory() async throws {
        let daemon = try await damagedDaemon { daemon in
            try FileManager.default.removeItem(atPath: daemon.stateDirectory)
            _ = FileManager.default.createFile(atPath: daemon.stateDirectory, contents: Data("not a directory".utf8))
        }
        defer { daemon.stop() }
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let fault = try #require(try await client.status().fault)
        #expect(fault.contains("cannot open the state in \(daemon.stateDirectory)"))
        do {
            _ = try await client.list()
            Issue.record("a listing was served in a fault state")
        } catch {
            guard case .ioFailure(let message) = error else { Issue.record("unexpected \(error)"); return }
            #expect(message.contains("fault state"))
        }
        await client.close()
    }
}
