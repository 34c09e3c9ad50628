import Foundation
import ProtectionTestSupport
import Testing

/// `protctl check` against a real daemon: a clean store, a tampered one,
/// JSON output, and who may ask.
@Suite("protctl check", .serialized)
struct ProtctlCheckEndToEndTests {
    private func run(_ daemon: DaemonProcess, _ arguments: [String], input: String? = nil) throws -> CommandResult {
        try ProtctlCommand.run(daemon, arguments, input: input)
    }

    /// A daemon holding a file in every class, a nested name and a long (200-byte) component.
    private func populatedDaemon(socketMode: String = "0660") throws -> DaemonProcess {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, socketMode: socketMode)
        for protection in ["complete", "completeUnlessOpen", "untilFirstUserAuthentication", "none"] {
            #expect(try run(daemon, ["write", "notes/\(protection)", "--protection", protection], input: protection).status == 0)
        }
        #expect(try run(daemon, ["write", String(repeating: "L", count: 200) + "/leaf"], input: "long").status == 0)
        return daemon
    }

    @Test("a clean store: exit 0 and a summary with no problem, in human and JSON output")
    func clean() throws {
        let daemon = try populatedDaemon()
        let human = try run(daemon, ["check"])
        #expect(human.status == 0, "\(human.stderr)")
        #expect(human.stdout == """
            namespaces: 1
            files: 5, key slots verified: 5, not verifiable (class key not in memory): 0
            problems: none

            """)
        let json = try run(daemon, ["--json", "check"])
        #expect(json.status == 0)
        #expect(json.json?["clean"] as? Bool == true)
        #expect(json.json?["files"] as? Int == 5)
        #expect((json.json?["problems"] as? [Any])?.isEmpty == true)
    }

    @Test("locked, class A and B files are not verifiable, which is no problem")
    func locked() throws {
        let daemon = try populatedDaemon()
        #expect(try run(daemon, ["passwd", "--stdin"], input: "pass\n").status == 0)
        #expect(try run(daemon, ["lock"]).status == 0)
        let json = try run(daemon, ["--json", "check"])
        #expect(json.status == 0, "\(json.stdout)")
        #expect(json.json?["unverifiableFiles"] as? Int == 2)
        #expect(json.json?["verifiedFiles"] as? Int == 3)
    }

    @Test("a truncated file: exit 65, and the problem names the file, its namespace and its path")
    func tampered() throws {
        let daemon = try populatedDaemon()
        let path = try daemon.diskPath("notes/none")
        #expect(truncate(path, 141) == 0)
        let relative = String(path.dropFirst(daemon.stateDirectory.count + 1))
        let human = try run(daemon, ["check"])
        #expect(human.status == 65)
        #expect(human.stdout.contains("problems: 1\n\(relative) (uid \(getuid()), \"notes/none\"): its length (141 bytes) "
                                      + "is not whole segments"), "\(human.stdout)")
        let json = try run(daemon, ["--json", "check"])
        #expect(json.status == 65)
        #expect(json.json?["clean"] as? Bool == false)
        let problem = try #require((json.json?["problems"] as? [[String: Any]])?.first)
        #expect(problem["name"] as? String == "notes/none")
        #expect(problem["uid"] as? Int == Int(getuid()))
        #expect(problem["path"] as? String == relative)
        // Reading it says the same.
        #expect(try run(daemon, ["read", "notes/none"]).status == 65)
    }

    @Test("a user outside the admin group is refused (exit 77), and the refusal is logged",
          .enabled(if: getuid() == 0, "needs root to run a client under another uid (setpriv)"))
    func notAdmin() throws {
        let daemon = try populatedDaemon(socketMode: "0666")
        let refused = try EndToEnd.protctlAsOtherUser(daemon, ["check"])
        #expect(refused.status == 77)
        #expect(refused.stderr.contains("permission denied"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        // The refusal is an audit line in the daemon's log, with the request and the peer.
        let line = daemon.log.split(separator: "\n").first { $0.contains("request refused: not permitted") }
        #expect(line?.contains("check") == true && line?.contains("protd.peer.uid") == true, "\(daemon.log)")
    }
}
