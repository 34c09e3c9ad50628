import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Adding the systemd credential `device-key` to a store made with the
/// state directory's `device-key` file, with the real daemon: the passcode
/// and every class's file are kept (README, "TPM-sealed device key").
@Suite("Device secret migration end to end", .serialized)
struct DeviceSecretEndToEndTests {
    static let systemdCreds = ["/usr/bin/systemd-creds", "/bin/systemd-creds"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Why `systemd-creds encrypt --with-key=host` cannot be used here, or
    /// nil when it can (it needs root, for /var/lib/systemd/credential.secret).
    static let hostKeyUnavailable: String? = {
        guard let systemdCreds = systemdCreds else { return "systemd-creds is not installed (apt-get install systemd)" }
        guard getuid() == 0 else { return "systemd-creds --with-key=host needs root" }
        guard let probe = try? TemporaryDirectory("creds-probe") else { return "no temporary directory" }
        defer { probe.remove() }
        _ = FileManager.default.createFile(atPath: probe.appending("plain"), contents: Data(count: 32))
        guard let result = try? CommandRunner.run(systemdCreds, ["encrypt", "--with-key=host", "--name=probe",
                                                                 probe.appending("plain"), probe.appending("sealed")]),
              result.status == 0 else { return "systemd-creds encrypt --with-key=host fails here" }
        return nil
    }()

    /// A credential directory as systemd's `LoadCredential=` makes it:
    /// `device-key` holding 32 random bytes.
    private func plainCredential(in directory: TemporaryDirectory) throws -> String {
        let credentials = directory.appending("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        #expect(FileManager.default.createFile(atPath: credentials + "/device-key", contents: key,
                                               attributes: [.posixPermissions: 0o400]))
        return credentials
    }

    /// The README recipe with the host key: seal 32 random bytes with
    /// `systemd-creds encrypt --with-key=host`, then decrypt them into a
    /// credential directory, as `LoadCredentialEncrypted=` does at start.
    private func hostSealedCredential(in directory: TemporaryDirectory) throws -> String {
        let systemdCreds = try #require(Self.systemdCreds)
        let plain = directory.appending("plain-key")
        _ = FileManager.default.createFile(atPath: plain, contents: Data((0..<32).map { _ in UInt8.random(in: 0...255) }))
        let sealed = directory.appending("protd-device-key")
        let encrypt = try CommandRunner.run(systemdCreds, ["encrypt", "--with-key=host", "--name=device-key", plain, sealed])
        #expect(encrypt.status == 0, "\(encrypt.stderr)")
        try FileManager.default.removeItem(atPath: plain)
        let credentials = directory.appending("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        let decrypt = try CommandRunner.run(systemdCreds, ["decrypt", "--name=device-key", sealed,
                                                           credentials + "/device-key"])
        #expect(decrypt.status == 0, "\(decrypt.stderr)")
        return credentials
    }

    /// A store made with the file secret (passcode set, a file in every
    /// class) restarted with `credentials`: before the unlock the former
    /// file stays; the unlock rewraps the key bag and removes it; after
    /// another restart the credential alone opens the same passcode and files.
    private func migrates(credentials makeCredentials: (TemporaryDirectory) throws -> String) async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let formerFile = daemon.stateDirectory + "/device-key"
        var client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.setPasscode("same passcode")
        for protection in ProtectionClass.allCases {
            try await client.file("\(protection)").write(Array("\(protection)".utf8), protection: protection)
        }
        await client.close()
        daemon.stop()
        #expect(FileManager.default.fileExists(atPath: formerFile))

        let credentials = try makeCredentials(daemon.directory)
        try daemon.start(environment: ["CREDENTIALS_DIRECTORY": credentials])
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let status = try await client.status()
        #expect(status.fault == nil)
        #expect(status.state == .beforeFirstUnlock)
        #expect(FileManager.default.fileExists(atPath: formerFile), "the former secret is kept until the unlock")
        try await client.unlock(passcode: "same passcode")
        #expect(!FileManager.default.fileExists(atPath: formerFile))
        #expect(daemon.log.contains("rewrapped the key bag under the configured device secret"))
        await client.close()

        daemon.stop()
        try daemon.start(environment: ["CREDENTIALS_DIRECTORY": credentials])
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.unlock(passcode: "same passcode")
        for protection in ProtectionClass.allCases {
            #expect(try await client.file("\(protection)").read() == Array("\(protection)".utf8))
        }
        #expect(!FileManager.default.fileExists(atPath: formerFile), "no new file secret was made")
        await client.close()
        daemon.stop()
    }

    static let systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    @Test("the README's drop-in with LoadCredentialEncrypted= passes systemd-analyze verify with the shipped unit",
          .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed"))
    func readmeDropInVerifies() throws {
        let analyze = try #require(Self.systemdAnalyze)
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: repository.appendingPathComponent("README.md"), encoding: .utf8)
        // The recipe writes the drop-in with printf '...'.
        let printf = try #require(readme.split(separator: "\n").first { $0.contains("printf '[Service]") })
        let quoted = try #require(printf.split(separator: "'").dropFirst().first)
        let dropIn = quoted.replacingOccurrences(of: "\\n", with: "\n")
        #expect(dropIn.contains("LoadCredentialEncrypted=device-key:/etc/credstore.encrypted/protd-device-key"))

        let directory = try TemporaryDirectory("dropin")
        defer { directory.remove() }
        for unit in ["protd.service", "protd.socket"] {
            let text = try String(contentsOf: repository.appendingPathComponent("systemd/\(unit)"), encoding: .utf8)
                .replacingOccurrences(of: "/usr/bin/protd", with: DaemonProcess.binaryPath)
            try text.write(toFile: directory.appending(unit), atomically: true, encoding: .utf8)
        }
        try FileManager.default.createDirectory(atPath: directory.appending("protd.service.d"),
                                                withIntermediateDirectories: true)
        let verify = { (text: String) throws -> CommandResult in
            try text.write(toFile: directory.appending("protd.service.d/device-key.conf"), atomically: true,
                           encoding: .utf8)
            var environment = ProcessInfo.processInfo.environment
            environment["SYSTEMD_UNIT_PATH"] = directory.path + ":"
            return try CommandRunner.run(analyze, ["verify", directory.appending("protd.service")],
                                         environment: environment)
        }
        let clean = try verify(dropIn)
        #expect(clean.status == 0 && clean.stdout.isEmpty && clean.stderr.isEmpty, "\(clean.stdout)\(clean.stderr)")
        // The control: the drop-in is read (a bad line in it is reported).
        let spoiled = try verify(dropIn + "NoSuchSetting=1\n")
        #expect(spoiled.stderr.contains("device-key.conf"), "\(spoiled.stderr)")
    }

    @Test("a store made with the file secret keeps its passcode and files after the device-key credential is added")
    func fileToCredential() async throws {
        try await migrates(credentials: plainCredential(in:))
    }

    @Test("the same with a credential sealed by systemd-creds encrypt --with-key=host",
          .enabled(if: hostKeyUnavailable == nil, "\(hostKeyUnavailable ?? "")"))
    func fileToHostSealedCredential() async throws {
        try await migrates(credentials: hostSealedCredential(in:))
    }
}
