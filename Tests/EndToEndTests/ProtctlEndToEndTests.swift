import Foundation
import ProtectionTestSupport
import Testing

/// protctl against a real daemon: every verb, in human and JSON output,
/// with the exit codes scripts rely on.
@Suite("protctl", .serialized)
struct ProtctlEndToEndTests {
    static let protctl = ProtctlCommand.path

    private func run(_ daemon: DaemonProcess, _ arguments: [String], input: String? = nil) throws -> CommandResult {
        try ProtctlCommand.run(daemon, arguments, input: input)
    }

    @Test("status, passwd, lock and unlock in human and JSON output")
    func lifecycle() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let status = try run(daemon, ["--json", "status"])
        #expect(status.status == 0)
        #expect(status.json?["state"] as? String == "unlocked")
        #expect(status.json?["passcodeSet"] as? Bool == false)
        #expect(try run(daemon, ["status"]).stdout.contains("state: unlocked"))
        let refused = try run(daemon, ["lock"])
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("passcode"))

        #expect(try run(daemon, ["passwd", "--stdin"], input: "first\n").status == 0)
        let changed = try run(daemon, ["--json", "passwd", "--stdin"], input: "first\nsecond")
        #expect(changed.status == 0)
        #expect(changed.json?["passcodeSet"] as? Bool == true)
        #expect(try run(daemon, ["passwd", "--stdin"], input: "wrong\nthird\n").status == 77)

        let locked = try run(daemon, ["--json", "lock", "--grace", "0"])
        #expect(locked.status == 0)
        #expect(locked.json?["state"] as? String == "locked")
        #expect(try run(daemon, ["--json", "status"]).json?["state"] as? String == "locked")
        // A trailing newline is optional; pam_exec's trailing NUL is ignored.
        #expect(try run(daemon, ["unlock", "--stdin"], input: "second").status == 0)
        #expect(try run(daemon, ["lock", "--grace", "0"]).status == 0)
        let unlocked = try run(daemon, ["--json", "unlock", "--stdin"], input: "second\n")
        #expect(unlocked.json?["state"] as? String == "unlocked")
        #expect(try run(daemon, ["lock", "--no-wait"]).status == 0)
        #expect(try run(daemon, ["unlock", "--stdin"], input: "second\u{0}").stdout.contains("state: unlocked"))
    }

    @Test("file verbs: write, read, ranges, ls, protection, rm, with their exit codes")
    func fileVerbs() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let directory = try TemporaryDirectory("protctl")
        defer { directory.remove() }
        let inputPath = directory.appending("in")
        try Data("from a file".utf8).write(to: URL(fileURLWithPath: inputPath))

        #expect(try run(daemon, ["write", "notes/a", "--protection", "complete"], input: "hello world").status == 0)
        let written = try run(daemon, ["--json", "write", "notes/b", "--input", inputPath, "--durable",
                                       "--protection", "completeUnlessOpen"])
        #expect(written.json?["size"] as? Int == 11)
        #expect(try run(daemon, ["read", "notes/a"]).stdout == "hello world")
        #expect(try run(daemon, ["read", "notes/a", "--offset", "6", "--length", "5"]).stdout == "world")
        let outputPath = directory.appending("out")
        #expect(try run(daemon, ["read", "notes/b", "--output", outputPath]).status == 0)
        #expect(try String(contentsOfFile: outputPath, encoding: .utf8) == "from a file")
        #expect(try FileManager.default.attributesOfItem(atPath: outputPath)[.posixPermissions] as? Int == 0o600)
        // A device is written in place, never replaced by a regular file.
        #expect(try run(daemon, ["read", "notes/b", "--output", "/dev/null"]).status == 0)
        #expect(try FileManager.default.attributesOfItem(atPath: "/dev/null")[.type] as? FileAttributeType == .typeCharacterSpecial)
        // A failed read leaves an existing output file as it was, and no temporary file.
        #expect(try run(daemon, ["read", "no/such", "--output", outputPath]).status == 66)
        #expect(try String(contentsOfFile: outputPath, encoding: .utf8) == "from a file")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(".protctl") }.isEmpty)
        let json = try run(daemon, ["--json", "read", "notes/a"])
        #expect(json.json?["base64"] as? String == Data("hello world".utf8).base64EncodedString())
        // --json prints the content, so it does not go with --output (which it used to ignore).
        let both = try run(daemon, ["--json", "read", "notes/a", "--output", directory.appending("unused")])
        #expect(both.status == 64 && both.stderr.contains("--output"), "\(both.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("unused")))
        // A name with a control character is listed escaped, not as two lines or a terminal sequence.
        #expect(try run(daemon, ["write", "odd\nname\u{1B}[2J"], input: "x").status == 0)
        let odd = try run(daemon, ["ls", "odd"]).stdout
        #expect(odd.split(separator: "\n").count == 1 && odd.contains("odd\\nname\\u{1B}[2J"), "\(odd)")
        #expect(try run(daemon, ["rm", "odd\nname\u{1B}[2J"]).status == 0)

        let listing = try run(daemon, ["ls", "notes/"])
        #expect(listing.stdout.contains("complete") && listing.stdout.contains("notes/a") && listing.stdout.contains("11"))
        let files = try run(daemon, ["--json", "ls"]).json?["files"] as? [[String: Any]]
        #expect(files?.compactMap { $0["name"] as? String } == ["notes/a", "notes/b"])
        #expect(files?.first?["protection"] as? String == "complete")

        #expect(try run(daemon, ["protection", "notes/a"]).stdout == "complete\n")
        #expect(try run(daemon, ["--json", "protection", "notes/a", "none"]).json?["protection"] as? String == "none")
        #expect(try run(daemon, ["protection", "notes/a", "untilFirstUserAuthentication"]).stdout
                == "completeUntilFirstUserAuthentication\n")
        #expect(try run(daemon, ["protection", "notes/a", "sometimes"]).status == 64)

        #expect(try run(daemon, ["rm", "notes/a"]).status == 0)
        let missing = try run(daemon, ["read", "notes/a"])
        #expect(missing.status == 66)
        #expect(missing.stderr.hasPrefix("protctl: ") && missing.stderr.split(separator: "\n").count == 1)
        #expect(try run(daemon, ["rm", "notes/a"]).status == 66)
        #expect(try run(daemon, ["write", "../escape"], input: "x").status == 64)
        #expect(try run(daemon, ["read", "notes/a", "--offset", "1"]).status == 64)
    }

    @Test("write of several chunks from a file or a pipe keeps every byte; an input that cannot be read fails and keeps the old file")
    func writeInputs() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let directory = try TemporaryDirectory("protctl-input")
        defer { directory.remove() }
        // Three whole 512 KiB chunks and a short last piece; a pipe hands
        // them over 64 KiB at a time, so each piece takes several reads.
        let content = (0..<(3 * 512 * 1024 + 7)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }
        let inputPath = directory.appending("in")
        try Data(content).write(to: URL(fileURLWithPath: inputPath))
        let outputPath = directory.appending("out")

        #expect(try run(daemon, ["write", "big", "--input", inputPath]).status == 0)
        #expect(try run(daemon, ["read", "big", "--output", outputPath]).status == 0)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: outputPath))) == content)

        let piped = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "write", "piped"],
                                          input: content)
        #expect(piped.status == 0)
        #expect(try run(daemon, ["read", "piped", "--output", outputPath]).status == 0)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: outputPath))) == content)

        // A directory opens but cannot be read: a one-line error, and the
        // file it would have replaced stays as it was.
        let unreadable = try run(daemon, ["write", "big", "--input", directory.path])
        #expect(unreadable.status == 1)
        #expect(unreadable.stderr == "protctl: cannot read the input: Is a directory\n")
        #expect(try run(daemon, ["read", "big", "--output", outputPath]).status == 0)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: outputPath))) == content)
    }

    @Test("a reader that goes away: read stops with exit 73 and says why, ls ends quietly; neither crashes")
    func closedStandardOutput() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let content = String(repeating: "x", count: 1 << 20)
        #expect(try run(daemon, ["write", "big"], input: content).status == 0)
        for (arguments, status) in [(["read", "big"], Int32(73)), (["ls"], 0)] {
            let (process, stdout, stderr) = ProtctlCommand.process(daemon, arguments)
            try stdout.fileHandleForReading.close()
            try process.run()
            let message = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationReason == .exit, "protctl \(arguments) died of a signal: \(message)")
            #expect(process.terminationStatus == status, "protctl \(arguments): \(message)")
            if status == 73 { #expect(message.contains("cannot write standard output")) }
        }
    }

    @Test("exit codes: 75 while locked, 65 on tampered data, 64 for erase without --yes or an empty passcode, 69 without a daemon")
    func exitCodes() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let nothingToUnlock = try run(daemon, ["unlock", "--stdin"], input: "")
        #expect(nothingToUnlock.status == 0)
        #expect(nothingToUnlock.stdout.contains("nothing to unlock"), "\(nothingToUnlock.stdout)")
        #expect(try run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        let empty = try run(daemon, ["unlock", "--stdin"], input: "")
        #expect(empty.status == 64, "\(empty.stderr)")
        #expect(try run(daemon, ["write", "a", "--protection", "complete"], input: "secret").status == 0)
        #expect(try run(daemon, ["write", "d", "--protection", "none"], input: "plain").status == 0)
        #expect(try run(daemon, ["lock"]).status == 0)
        let unavailable = try run(daemon, ["read", "a"])
        #expect(unavailable.status == 75)
        #expect(unavailable.stderr.contains("unlock"))

        // Flip one content byte of d on disk.
        let files = try daemon.diskPath("d")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: files))
        bytes[bytes.count - 20] ^= 1
        try bytes.write(to: URL(fileURLWithPath: files))
        #expect(try run(daemon, ["read", "d"]).status == 65)

        #expect(try run(daemon, ["erase"]).status == 64)
        daemon.stop()
        #expect(try run(daemon, ["status"]).status == 69)
    }

    @Test("five failures make unlock exit 75 with when to retry, and a restart does not lift the delay")
    func rateLimitExitCodes() throws {
        let daemon = try DaemonProcess()
        #expect(try run(daemon, ["passwd", "--stdin"], input: "right").status == 0)
        try daemon.restart()
        for _ in 1...5 {
            #expect(try run(daemon, ["unlock", "--stdin"], input: "wrong").status == 77)
        }
        let limited = try run(daemon, ["unlock", "--stdin"], input: "right")
        #expect(limited.status == 75)
        // A loaded machine may take a second between the fifth failure and this try.
        #expect(["wait 1 minute before", "wait 59 seconds before"].contains { limited.stderr.contains($0) },
                "\(limited.stderr)")
        try daemon.restart()
        #expect(try run(daemon, ["unlock", "--stdin"], input: "right").status == 75)
        #expect(try run(daemon, ["--json", "status"]).json?["retryAfterSeconds"] as? Int ?? 0 > 0)
    }

    @Test("watch --count 3 --ack sees will, did-unavailable and did-available around a lock and unlock by another process")
    func watchAcknowledges() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 30)
        #expect(try run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        let watcher = Process()
        watcher.executableURL = URL(fileURLWithPath: Self.protctl)
        watcher.arguments = ["--socket", daemon.socketPath, "--json", "watch", "--count", "3", "--ack"]
        let output = Pipe()
        watcher.standardOutput = output
        try watcher.run()
        // The first JSON line says the watcher is subscribed; the lock must wait for it.
        let reader = output.fileHandleForReading
        let buffered = ProtctlCommand.readFirstLine(reader)
        let first = buffered.split(separator: UInt8(ascii: "\n")).first.flatMap {
            try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any]
        }
        #expect(first?["subscribed"] as? Bool == true)
        let started = Date()
        #expect(try run(daemon, ["lock"]).status == 0)
        #expect(Date().timeIntervalSince(started) < 10, "the lock did not end early on the acknowledgement")
        #expect(try run(daemon, ["unlock", "--stdin"], input: "pass").status == 0)
        watcher.waitUntilExit()
        #expect(watcher.terminationStatus == 0)
        let lines = String(decoding: buffered + reader.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").dropFirst()
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.compactMap { $0["event"] as? String } == [
            "protectedDataWillBecomeUnavailable", "protectedDataDidBecomeUnavailable", "protectedDataDidBecomeAvailable",
        ])
    }

    @Test("erase --yes as root destroys every file and the passcode; a bad socket path is a configuration error (78)")
    func eraseAndConfiguration() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        #expect(try run(daemon, ["write", "gone"], input: "bye").status == 0)
        let erased = try run(daemon, ["--json", "erase", "--yes"])
        #expect(erased.status == 0)
        #expect(erased.json?["erased"] as? Bool == true)
        #expect(try run(daemon, ["read", "gone"]).status == 66)
        #expect(try run(daemon, ["--json", "status"]).json?["passcodeSet"] as? Bool == false)
        let tooLong = try CommandRunner.run(Self.protctl, ["--socket", "/" + String(repeating: "s", count: 200), "status"])
        #expect(tooLong.status == 78)
        #expect(tooLong.stderr.contains("socket path"))
    }

    @Test("watch without --json prints one line per event")
    func watchHuman() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        let watcher = Process()
        watcher.executableURL = URL(fileURLWithPath: Self.protctl)
        watcher.arguments = ["--socket", daemon.socketPath, "watch", "--count", "2"]
        let output = Pipe()
        watcher.standardOutput = output
        try watcher.run()
        let reader = output.fileHandleForReading
        let text = ProtctlCommand.readFirstLine(reader)
        #expect(String(decoding: text, as: UTF8.self).hasPrefix("watching"))
        #expect(try run(daemon, ["lock"]).status == 0)
        watcher.waitUntilExit()
        let lines = String(decoding: text + reader.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines.dropFirst().first?.contains("protectedDataWillBecomeUnavailable state=locking") == true)
        #expect(lines.last?.contains("protectedDataDidBecomeUnavailable state=locked") == true)
    }

    @Test("passwd and unlock --stdin take CRLF lines: each line's CR is not part of the passcode")
    func stdinCRLF() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try run(daemon, ["passwd", "--stdin"], input: "first\r\n").status == 0)
        let changed = try run(daemon, ["passwd", "--stdin"], input: "first\r\nsecond\r\n")
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(try run(daemon, ["lock", "--grace", "0"]).status == 0)
        #expect(try run(daemon, ["unlock", "--stdin"], input: "second\r\n").status == 0)
        #expect(try run(daemon, ["lock", "--grace", "0"]).status == 0)
        #expect(try run(daemon, ["unlock", "--stdin"], input: "second").status == 0)
    }

    @Test("read with an --offset plus --length past 2^64-1 reads to the end of the file")
    func readRangeOverflow() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try run(daemon, ["write", "a"], input: "hello world").status == 0)
        let read = try run(daemon, ["read", "a", "--offset", "1", "--length", String(UInt64.max)])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == "ello world")
    }

    @Test("lock --grace nan or inf is a usage error (64) and does not lock")
    func lockGraceNotFinite() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        #expect(try run(daemon, ["passwd", "--stdin"], input: "pass").status == 0)
        for grace in ["nan", "inf"] {
            let refused = try run(daemon, ["lock", "--grace", grace])
            #expect(refused.status == 64, "--grace \(grace): \(refused.stderr)")
            #expect(refused.stderr.contains("--grace"), "--grace \(grace): \(refused.stderr)")
        }
        #expect(try run(daemon, ["--json", "status"]).json?["state"] as? String == "unlocked")
    }

    @Test("an empty PROTD_SOCKET is unset: protctl uses the default socket path, not an empty one")
    func emptySocketVariable() throws {
        let environment = DaemonProcess.childEnvironment(inheriting: ProcessInfo.processInfo.environment,
                                                         adding: ["PROTD_SOCKET": ""])
        let result = try CommandRunner.run(Self.protctl, ["status"], environment: environment)
        // Unless a system protd is running, the default path is unreachable (69) and named in the error.
        if result.status != 0 {
            #expect(result.status == 69, "\(result.stderr)")
            #expect(result.stderr.contains("/run/protd/protd.sock"), "\(result.stderr)")
        }
    }

    @Test("watch, with or without --count, exits 69 with an error when the daemon goes away")
    func watchDaemonGone() throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        var watchers: [(process: Process, stdout: Pipe, stderr: Pipe)] = []
        for arguments in [["watch"], ["--json", "watch", "--count", "5"]] {
            let (watcher, stdout, stderr) = ProtctlCommand.process(daemon, arguments)
            try watcher.run()
            // The first line says the watcher is subscribed.
            #expect(!ProtctlCommand.readFirstLine(stdout.fileHandleForReading).isEmpty)
            watchers.append((watcher, stdout, stderr))
        }
        daemon.stop()
        for (watcher, _, stderr) in watchers {
            let deadline = Date().addingTimeInterval(20)
            while watcher.isRunning && Date() < deadline { usleep(10_000) }
            if watcher.isRunning { watcher.terminate() }
            watcher.waitUntilExit()
            let message = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(watcher.terminationReason == .exit)
            #expect(watcher.terminationStatus == 69, "\(watcher.arguments ?? []): \(message)")
            #expect(message.hasPrefix("protctl: ") && message.contains("protd"), "\(watcher.arguments ?? []): \(message)")
        }
    }

    @Test("help exists for every verb, and completions and errors for bad usage")
    func helpAndUsage() throws {
        for verb in ["status", "lock", "unlock", "passwd", "erase", "check", "write", "read", "ls", "rm", "protection", "watch"] {
            let help = try CommandRunner.run(Self.protctl, [verb, "--help"])
            #expect(help.status == 0 && help.stdout.contains("USAGE"), "no help for \(verb)")
        }
        let bash = try CommandRunner.run(Self.protctl, ["--generate-completion-script", "bash"])
        #expect(bash.status == 0 && bash.stdout.contains("protctl"))
        #expect(try CommandRunner.run(Self.protctl, ["frobnicate"]).status == 64)
    }
}
