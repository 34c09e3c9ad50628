import DataProtection
import Foundation
import ProtectionTestSupport
import Sodium
import Testing

/// Running protd the way administrators do: other users, systemd
/// readiness and socket activation, unit checks, PAM.
@Suite("Operations", .serialized)
struct OperationsEndToEndTests {
    static let protctl = CommandRunner.builtProduct("protctl")
    static let isRoot = getuid() == 0
    static let systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let pamtester = ["/usr/bin/pamtester", "/usr/sbin/pamtester"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let socketActivate = ["/usr/bin/systemd-socket-activate", "/bin/systemd-socket-activate"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    private func asOtherUser(_ daemon: DaemonProcess, _ arguments: [String], input: String? = nil) throws -> CommandResult {
        try EndToEnd.protctlAsOtherUser(daemon, arguments, input: input)
    }

    @Test("a socket that cannot be made stops protd with a message naming why: a missing socket group is a configuration error (78), a path through a file names the path (1)")
    func socketStartFailures() throws {
        let directory = try TemporaryDirectory("protd-socket-start")
        defer { directory.remove() }
        _ = FileManager.default.createFile(atPath: directory.appending("a-file"), contents: Data())
        let common = ["--state-directory", directory.appending("state"), "--memory-require-locked", "false"]
        let noGroup = try CommandRunner.run(DaemonProcess.binaryPath, common + [
            "--socket-path", directory.appending("s"), "--socket-group", "no-such-group-\(getpid())"])
        #expect(noGroup.status == 78, "\(noGroup.stderr)")
        #expect(noGroup.stderr.contains("socket.group"), "\(noGroup.stderr)")
        let badPath = directory.appending("a-file/s")
        let underFile = try CommandRunner.run(DaemonProcess.binaryPath, common + ["--socket-path", badPath])
        #expect(underFile.status == 1, "\(underFile.stderr)")
        #expect(underFile.stderr.contains("cannot listen on \(badPath): Not a directory"), "\(underFile.stderr)")
    }

    @Test("another uid cannot list, read, overwrite or delete the first uid's files and is refused lock, passwd and erase",
          .enabled(if: isRoot, "needs root to run a client under another uid (setpriv)"))
    func perUidIsolation() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, socketMode: "0666")
        let owner = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await owner.setPasscode("pass")
        try await owner.file("mine").write(Array("root's secret".utf8), protection: .none)

        let listing = try asOtherUser(daemon, ["--json", "ls"])
        #expect(listing.status == 0, "\(listing.stderr)")
        #expect((listing.json?["files"] as? [Any])?.isEmpty == true)
        #expect(try asOtherUser(daemon, ["read", "mine"]).status == 66)
        #expect(try asOtherUser(daemon, ["rm", "mine"]).status == 66)
        #expect(try asOtherUser(daemon, ["write", "mine", "--protection", "none"], input: "overwritten").status == 0)
        #expect(try asOtherUser(daemon, ["read", "mine"]).stdout == "overwritten")
        #expect(try await owner.file("mine").read() == Array("root's secret".utf8))
        #expect(try await owner.list().map(\.name) == ["mine"])

        #expect(try asOtherUser(daemon, ["lock"]).status == 77)
        #expect(try asOtherUser(daemon, ["passwd", "--stdin"], input: "pass\nstolen\n").status == 77)
        #expect(try asOtherUser(daemon, ["erase", "--yes"]).status == 77)
        #expect(try await owner.status().state == .unlocked)
        #expect(try await owner.file("mine").read() == Array("root's secret".utf8))
    }

    @Test("a user the socket's mode shuts out is told which group to join",
          .enabled(if: isRoot, "needs root to run a client under another uid (setpriv)"))
    func permissionDeniedNamesTheGroup() throws {
        let daemon = try DaemonProcess(socketMode: "0660")
        let refused = try asOtherUser(daemon, ["status"])
        #expect(refused.status == 69)
        #expect(refused.stderr.contains("permission denied") && refused.stderr.contains("join the group"),
                "\(refused.stderr)")
        #expect(!refused.stderr.contains("check that it is running"), "\(refused.stderr)")
    }

    @Test("protd serves where PROTD_SOCKET says, the variable the client library reads, and names unknown PROTD_ variables")
    func socketVariable() async throws {
        let daemon = try DaemonProcess(environment: ["PROTD_SOKET": "/typo"], socketFromEnvironment: true)
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await client.status().state == .unlocked)
        await client.close()
        #expect(daemon.log.contains("PROTD_SOKET is not one protd reads"), "\(daemon.log)")
    }

    @Test("clients holding every connection slot cannot keep an administrator from connecting and locking",
          .enabled(if: isRoot, "needs root to run a client under another uid (setpriv)"))
    func slotsKeptForAdmins() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, socketMode: "0666",
                                       extraConfig: "limits:\n  max-connections: 2\n")
        var held: [DataProtectionClient] = []
        for _ in 0..<2 { held.append(try await DataProtectionClient.connect(socketPath: daemon.socketPath)) }
        try await held[0].setPasscode("pass")
        // An ordinary user gets tooManyConnections (exit 69)...
        #expect(try asOtherUser(daemon, ["status"]).status == 69)
        // ...while root still has the 8 slots kept for administrators.
        for _ in 0..<8 { held.append(try await DataProtectionClient.connect(socketPath: daemon.socketPath)) }
        try await held.last!.lock()
        #expect(try await held[0].status().state == .locked)
        #expect(await EndToEnd.failure { _ = try await DataProtectionClient.connect(socketPath: daemon.socketPath) }
                == .tooManyConnections)
        for client in held { await client.close() }
    }

    @Test("with a NOTIFY_SOCKET, protd sends READY=1 only once it serves and STOPPING=1 on SIGTERM")
    func readinessNotification() async throws {
        let directory = try TemporaryDirectory("notify")
        defer { directory.remove() }
        let notify = try NotifySocket(path: directory.appending("n"))
        let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": notify.path])
        let ready = try #require(notify.receive())
        #expect(ready.contains("READY=1"))
        // Ready means serving: a client connects straight away.
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await client.status().state == .unlocked)
        let stop = daemon.stop()
        #expect(stop?.status == 0)
        let stopping = try #require(notify.receive())
        #expect(stopping.contains("STOPPING=1"))
    }

    @Test("protd logs the libsodium it runs, and it is the one pkg-config names, not a stale link")
    func startLogNamesLibsodium() throws {
        let daemon = try DaemonProcess()
        #expect(!SodiumRuntime.version.isEmpty)
        #expect(daemon.log.contains("protd.libsodium=\(SodiumRuntime.version)"), "\(daemon.log)")
        // Every build links the libsodium pkg-config names (Debian's
        // libsodium-dev); the binaries must have linked that one.
        guard let pkgConfig = ["/usr/bin/pkg-config", "/usr/local/bin/pkg-config"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) else { return }
        let named = try CommandRunner.run(pkgConfig, ["--modversion", "libsodium"])
        #expect(named.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == SodiumRuntime.version)
    }

    @Test("started by systemd-socket-activate with a listening socket passed in, protd serves on it",
          .enabled(if: socketActivate != nil, "systemd-socket-activate is not installed"))
    func socketActivation() async throws {
        let daemon = try DaemonProcess()
        daemon.stop()
        let activated = daemon.directory.appending("activated")
        let logPath = daemon.directory.appending("activation.log")
        let process = try SpawnedProcess([try #require(Self.socketActivate), "-l", activated,
                                          DaemonProcess.binaryPath, "--config", daemon.configPath], logPath: logPath)
        // The socket's file appears at its bind, a moment before it listens
        // (a connect then is refused): so wait for a connection, not the file.
        var connected: DataProtectionClient?
        #expect(await EndToEnd.eventually {
            connected = try? await DataProtectionClient.connect(socketPath: activated)
            return connected != nil
        })
        let client = try #require(connected)
        #expect(try await client.status().state == .unlocked)
        try await client.file("via-activation").write([1, 2, 3], protection: .none)
        #expect(try await client.file("via-activation").read() == [1, 2, 3])
        await client.close()
        // protd used the passed socket, not its own configured one.
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(process.stop() == 0)
        let output = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        #expect(output.contains("serving on a socket passed by systemd"), "\(output)")
    }

    @Test("systemd-analyze verify passes and security scores 1.0 or lower (SAFE) on the unit files",
          .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed"))
    func unitFilesVerify() throws {
        let analyze = try #require(Self.systemdAnalyze)
        let directory = try TemporaryDirectory("units")
        defer { directory.remove() }
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("systemd")
        let units = ["protd.service", "protd.socket", "protd-lock-before-sleep.service"]
        for unit in units {
            // verify checks that ExecStart exists: point it at the binaries just built.
            let text = try String(contentsOf: repository.appendingPathComponent(unit), encoding: .utf8)
                .replacingOccurrences(of: "/usr/bin/protctl", with: CommandRunner.builtProduct("protctl"))
                .replacingOccurrences(of: "/usr/bin/protd", with: DaemonProcess.binaryPath)
            try text.write(toFile: directory.appending(unit), atomically: true, encoding: .utf8)
        }
        let verify = try CommandRunner.run(analyze, ["verify"] + units.map(directory.appending))
        #expect(verify.status == 0)
        #expect(verify.stdout.isEmpty && verify.stderr.isEmpty, "verify said: \(verify.stdout)\(verify.stderr)")
        // systemd's --threshold is on a 0-100 scale, ten times the printed
        // exposure: --threshold=10 is the 1.0 (SAFE band) the issue asks for.
        // --threshold=1 would mean 0.1, out of reach without PrivateUsers=
        // (which breaks per-uid namespaces) and without AF_UNIX.
        let security = try CommandRunner.run(analyze, ["security", "--offline=true", "--threshold=10",
                                                       directory.appending("protd.service")])
        let verdict = security.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(security.status == 0, "\(verdict)")
        let score = verdict.split(separator: " ").compactMap { Double($0) }.first
        #expect(try #require(score) <= 1.0, "\(verdict)")
        print("systemd-analyze security: \(verdict)")
    }

    /// A daemon with passcode `login-passcode`, restarted (before its
    /// first unlock), and a throw-away PAM service with docs/pam.md's lines
    /// (without the group gate when `unlockGroup` is nil); `body` gets
    /// both, and the service file is removed after.
    private func withPAMService(unlockGroup: String? = "root",
                                _ body: (DaemonProcess, String) async throws -> Void) async throws {
        let daemon = try DaemonProcess()
        let setup = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await setup.setPasscode("login-passcode")
        await setup.close()
        try daemon.restart()
        let service = "protd-test-\(getpid())"
        let path = "/etc/pam.d/\(service)"
        let gate = unlockGroup.map { "auth [success=ignore default=1] pam_succeed_if.so quiet user ingroup \($0)\n" } ?? ""
        try """
            \(gate)auth optional pam_exec.so expose_authtok quiet \(Self.protctl) --socket \(daemon.socketPath) unlock --stdin --pam
            auth required pam_permit.so
            account required pam_permit.so

            """.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await body(daemon, service)
    }

    @Test("pam_exec with expose_authtok runs protctl unlock --stdin at login (pamtester)",
          .enabled(if: isRoot && pamtester != nil, "needs root and pamtester to install a PAM service"))
    func pamUnlock() async throws {
        try await withPAMService { daemon, service in
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            #expect(try await client.status().state == .beforeFirstUnlock)
            let login = try CommandRunner.run(try #require(Self.pamtester), [service, "root", "authenticate"],
                                              input: Array("login-passcode\n".utf8))
            #expect(login.status == 0, "pamtester: \(login.stdout)\(login.stderr)")
            #expect(try await client.status().state == .unlocked)
        }
    }

    @Test("only logins of users in the unlock group try the passcode: nobody's login counts no attempt, root's unlocks",
          .enabled(if: isRoot && pamtester != nil, "needs root and pamtester to install a PAM service"))
    func pamUnlockGroupOnly() async throws {
        try await withPAMService { daemon, service in
            let pamtester = try #require(Self.pamtester)
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            // `nobody` is not in group root: its password is never tried as the passcode.
            let other = try CommandRunner.run(pamtester, [service, "nobody", "authenticate"],
                                              input: Array("nobody's own password\n".utf8))
            #expect(other.status == 0, "the login itself goes on: \(other.stdout)\(other.stderr)")
            let afterOther = try await client.status()
            #expect(afterOther.state == .beforeFirstUnlock)
            #expect(afterOther.failedAttempts == 0, "another user's login counted as a failed attempt")
            let member = try CommandRunner.run(pamtester, [service, "root", "authenticate"],
                                               input: Array("login-passcode\n".utf8))
            #expect(member.status == 0, "pamtester: \(member.stdout)\(member.stderr)")
            #expect(try await client.status().state == .unlocked)
        }
    }

    @Test("with --pam a user's wrong logins count against that user only: nobody is held up, root still unlocks",
          .enabled(if: isRoot && pamtester != nil, "needs root and pamtester to install a PAM service"))
    func pamAttemptsPerUser() async throws {
        try await withPAMService(unlockGroup: nil) { daemon, service in
            let pamtester = try #require(Self.pamtester)
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            // The standard policy delays the sixth attempt after five failures.
            for _ in 0..<5 {
                let login = try CommandRunner.run(pamtester, [service, "nobody", "authenticate"],
                                                  input: Array("nobody's own password\n".utf8))
                #expect(login.status == 0, "the login itself goes on: \(login.stderr)")
            }
            let delayed = try CommandRunner.run(pamtester, [service, "nobody", "authenticate"],
                                                input: Array("login-passcode\n".utf8))
            #expect(delayed.status == 0)
            let afterNobody = try await client.status()
            #expect(afterNobody.state == .beforeFirstUnlock, "nobody's sixth attempt waits for its delay, right passcode or not")
            #expect(afterNobody.failedAttempts == 0, "nobody's failures counted against the machine")
            let root = try CommandRunner.run(pamtester, [service, "root", "authenticate"],
                                             input: Array("login-passcode\n".utf8))
            #expect(root.status == 0, "pamtester: \(root.stdout)\(root.stderr)")
            #expect(try await client.status().state == .unlocked, "root is not held up by nobody's failures")

            // Only root may speak for another user's login.
            let claim = try CommandRunner.run("/usr/bin/setpriv", [
                "--reuid=4242", "--regid=4242", "--groups=0", Self.protctl, "--socket", daemon.socketPath,
                "unlock", "--stdin", "--pam",
            ], input: Array("login-passcode\n".utf8), environment: ["PAM_USER": "root"])
            #expect(claim.status == 77, "\(claim.stderr)")
            #expect(claim.stderr.contains("only root may unlock at another user's login"), "\(claim.stderr)")
            // Anyone but root unlocking at their own login counts against the machine (erase-after-N holds).
            try await client.lock(grace: .zero)
            let nobody = "\(getpwnam("nobody").pointee.pw_uid)"
            let own = try CommandRunner.run("/usr/bin/setpriv", [
                "--reuid=\(nobody)", "--regid=\(nobody)", "--groups=0", Self.protctl, "--socket", daemon.socketPath,
                "unlock", "--stdin", "--pam",
            ], input: Array("a wrong one\n".utf8), environment: ["PAM_USER": "nobody"])
            #expect(own.status == 77, "\(own.stderr)")
            #expect(try await client.status().failedAttempts == 1)
        }
    }

    @Test("a PAM stack that runs as the user (a screen locker) unlocks only when the user is in the socket's group",
          .enabled(if: isRoot && pamtester != nil, "needs root and pamtester to install a PAM service"))
    func pamUnlockAsUser() async throws {
        try await withPAMService(unlockGroup: nil) { daemon, service in
            let pamtester = try #require(Self.pamtester)
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            // pam_exec runs protctl with the caller's real uid: nobody's own
            // here, logging in as nobody, so the socket's group alone decides.
            let nobody = "\(getpwnam("nobody").pointee.pw_uid)"
            let outside = try CommandRunner.run("/usr/bin/setpriv", [
                "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", pamtester, service, "nobody", "authenticate",
            ], input: Array("login-passcode\n".utf8))
            #expect(outside.status == 0, "the login itself goes on (optional): \(outside.stderr)")
            #expect(try await client.status().state == .beforeFirstUnlock)
            // The test daemon's socket is root:root 0660; group 0 stands for `protd`.
            let member = try CommandRunner.run("/usr/bin/setpriv", [
                "--reuid=\(nobody)", "--regid=\(nobody)", "--groups=0", pamtester, service, "nobody", "authenticate",
            ], input: Array("login-passcode\n".utf8))
            #expect(member.status == 0, "pamtester: \(member.stdout)\(member.stderr)")
            #expect(try await client.status().state == .unlocked)
        }
    }
}
