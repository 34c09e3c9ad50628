import Logging
import ProtectionConfiguration
import ProtectionCore
import Sodium
import Testing

@Suite("Loading the daemon configuration")
struct LoadingTests {
    /// A YAML file setting every key to something other than its default.
    static let everyKeyYAML = """
        socket:
          path: /tmp/p/s.sock
          mode: "0600"
          group: wheel
        state:
          directory: /tmp/p/state
        device-key:
          file: /tmp/p/device-key
        lock:
          grace-period-seconds: 2.5
          first-unlock-timeout: 90m
          admin-group: staff
        passcode:
          argon2-operations: 3
          argon2-memory-kib: 16384
          failed-attempt-delays: [0, 5, 10]
          erase-after-failed-attempts: 20
        storage:
          segment-size: 4096
          cipher: xchacha20-poly1305
        log:
          level: warning
        limits:
          max-frame-bytes: 524288
          max-connections: 8
          max-open-handles-per-connection: 16
          max-connections-per-uid: 4
          max-open-handles-per-uid: 32
          max-subscribers-per-uid: 2
          quota-bytes-per-uid: 1000000
          quota-files-per-uid: 100
        """

    /// What `everyKeyYAML` (and its JSON twin) must load as.
    static let everyKeyConfiguration = DaemonConfiguration(
        socketPath: "/tmp/p/s.sock", socketMode: 0o600, socketGroup: "wheel",
        stateDirectory: "/tmp/p/state", deviceKeyFile: "/tmp/p/device-key",
        gracePeriod: .milliseconds(2500), firstUnlockTimeout: .seconds(5400), adminGroup: "staff",
        passcodeCost: Argon2id.Cost(operations: 3, memoryBytes: 16 << 20),
        failedAttemptPolicy: try! FailedAttemptPolicy(delaysInSeconds: [0, 5, 10], eraseAfter: 20),
        segmentSize: 4096, cipher: .xChaCha20Poly1305, logLevel: .warning,
        maxFrameBytes: 524_288, maxConnections: 8, maxOpenHandlesPerConnection: 16,
        maxConnectionsPerUID: 4, maxOpenHandlesPerUID: 32, maxSubscribersPerUID: 2,
        quotaBytesPerUID: 1_000_000, quotaFilesPerUID: 100)

    @Test("with no file, variables or flags every value is the default")
    func defaults() async throws {
        let configuration = try await load()
        #expect(configuration == DaemonConfiguration())
        #expect(configuration.socketPath == "/run/protd/protd.sock")
        #expect(configuration.socketMode == 0o660)
        #expect(configuration.socketGroup == nil)
        #expect(configuration.stateDirectory == "/var/lib/protd")
        #expect(configuration.deviceKeyFile == nil)
        #expect(configuration.gracePeriod == .seconds(10))
        #expect(configuration.firstUnlockTimeout == .seconds(72 * 3600))
        #expect(configuration.adminGroup == "protd-admin")
        #expect(configuration.passcodeCost == .interactive)
        #expect(configuration.failedAttemptPolicy == .standard)
        #expect(configuration.segmentSize == 65_536)
        #expect(configuration.cipher == nil, "auto: the fastest cipher this CPU runs")
        #expect(configuration.logLevel == .info)
        #expect(configuration.maxFrameBytes == 1_049_600)
        #expect(configuration.maxConnections == 256)
        #expect(configuration.maxOpenHandlesPerConnection == 1024)
        #expect(configuration.maxConnectionsPerUID == 64)
        #expect(configuration.maxOpenHandlesPerUID == 4096)
        #expect(configuration.maxSubscribersPerUID == 16)
        #expect(configuration.quotaBytesPerUID == 0, "off")
        #expect(configuration.quotaFilesPerUID == 0, "off")
    }

    @Test("a YAML file given by --config sets every key")
    func yamlFile() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", Self.everyKeyYAML)
        #expect(try await load(["--config", path]) == Self.everyKeyConfiguration)
    }

    @Test("a JSON file loads through the YAML provider")
    func jsonFile() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.json", """
            {
              "socket": {"path": "/tmp/p/s.sock", "mode": "0600", "group": "wheel"},
              "state": {"directory": "/tmp/p/state"},
              "device-key": {"file": "/tmp/p/device-key"},
              "lock": {"grace-period-seconds": 2.5, "first-unlock-timeout": "90m", "admin-group": "staff"},
              "passcode": {
                "argon2-operations": 3, "argon2-memory-kib": 16384,
                "failed-attempt-delays": [0, 5, 10], "erase-after-failed-attempts": 20
              },
              "storage": {"segment-size": 4096, "cipher": "xchacha20-poly1305"},
              "log": {"level": "warning"},
              "limits": {"max-frame-bytes": 524288, "max-connections": 8, "max-open-handles-per-connection": 16,
                         "max-connections-per-uid": 4, "max-open-handles-per-uid": 32, "max-subscribers-per-uid": 2,
                         "quota-bytes-per-uid": 1000000, "quota-files-per-uid": 100}
            }
            """)
        #expect(try await load(["--config", path]) == Self.everyKeyConfiguration)
    }

    @Test("PROTD_CONFIG names the file when --config is absent")
    func configFromEnvironment() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "log:\n  level: error\n")
        #expect(try await load(environment: ["PROTD_CONFIG": path]).logLevel == .error)
    }

    @Test("--config wins over PROTD_CONFIG")
    func configFlagBeatsEnvironment() async throws {
        let files = try ConfigFiles()
        let flagFile = try files.write("flag.yaml", "log:\n  level: error\n")
        let environmentFile = try files.write("env.yaml", "log:\n  level: trace\n")
        let configuration = try await load(["--config", flagFile], environment: ["PROTD_CONFIG": environmentFile])
        #expect(configuration.logLevel == .error)
    }

    @Test("a PROTD_ variable overrides the file")
    func environmentOverridesFile() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "lock:\n  grace-period-seconds: 3\nsocket:\n  path: /from/file.sock\n")
        let configuration = try await load(["--config", path], environment: ["PROTD_LOCK_GRACE_PERIOD_SECONDS": "7"])
        #expect(configuration.gracePeriod == .seconds(7))
        #expect(configuration.socketPath == "/from/file.sock")
    }

    @Test("a flag overrides the PROTD_ variable")
    func flagOverridesEnvironment() async throws {
        let configuration = try await load(
            ["--lock-grace-period-seconds", "0"],
            environment: ["PROTD_LOCK_GRACE_PERIOD_SECONDS": "7", "PROTD_LOG_LEVEL": "debug"])
        #expect(configuration.gracePeriod == .zero)
        #expect(configuration.logLevel == .debug)
    }

    @Test("every key is read from its PROTD_ variable")
    func everyKeyFromEnvironment() async throws {
        let configuration = try await load(environment: [
            "PROTD_SOCKET_PATH": "/tmp/p/s.sock", "PROTD_SOCKET_MODE": "0600", "PROTD_SOCKET_GROUP": "wheel",
            "PROTD_STATE_DIRECTORY": "/tmp/p/state", "PROTD_DEVICE_KEY_FILE": "/tmp/p/device-key",
            "PROTD_LOCK_GRACE_PERIOD_SECONDS": "2.5", "PROTD_LOCK_FIRST_UNLOCK_TIMEOUT": "90m",
            "PROTD_LOCK_ADMIN_GROUP": "staff",
            "PROTD_PASSCODE_ARGON2_OPERATIONS": "3", "PROTD_PASSCODE_ARGON2_MEMORY_KIB": "16384",
            "PROTD_PASSCODE_FAILED_ATTEMPT_DELAYS": "0,5,10", "PROTD_PASSCODE_ERASE_AFTER_FAILED_ATTEMPTS": "20",
            "PROTD_STORAGE_SEGMENT_SIZE": "4096", "PROTD_STORAGE_CIPHER": "xchacha20-poly1305", "PROTD_LOG_LEVEL": "warning",
            "PROTD_LIMITS_MAX_FRAME_BYTES": "524288", "PROTD_LIMITS_MAX_CONNECTIONS": "8",
            "PROTD_LIMITS_MAX_OPEN_HANDLES_PER_CONNECTION": "16", "PROTD_LIMITS_MAX_CONNECTIONS_PER_UID": "4",
            "PROTD_LIMITS_MAX_OPEN_HANDLES_PER_UID": "32", "PROTD_LIMITS_MAX_SUBSCRIBERS_PER_UID": "2",
            "PROTD_LIMITS_QUOTA_BYTES_PER_UID": "1000000", "PROTD_LIMITS_QUOTA_FILES_PER_UID": "100",
        ])
        #expect(configuration == Self.everyKeyConfiguration)
    }

    @Test("every key is read from its long flag")
    func everyKeyFromFlags() async throws {
        let configuration = try await load([
            "--socket-path", "/tmp/p/s.sock", "--socket-mode", "0600", "--socket-group", "wheel",
            "--state-directory", "/tmp/p/state", "--device-key-file", "/tmp/p/device-key",
            "--lock-grace-period-seconds", "2.5", "--lock-first-unlock-timeout", "90m", "--lock-admin-group", "staff",
            "--passcode-argon2-operations", "3", "--passcode-argon2-memory-kib", "16384",
            "--passcode-failed-attempt-delays", "0", "5", "10", "--passcode-erase-after-failed-attempts", "20",
            "--storage-segment-size", "4096", "--storage-cipher", "xchacha20-poly1305", "--log-level", "warning",
            "--limits-max-frame-bytes", "524288", "--limits-max-connections", "8",
            "--limits-max-open-handles-per-connection", "16", "--limits-max-connections-per-uid", "4",
            "--limits-max-open-handles-per-uid", "32", "--limits-max-subscribers-per-uid", "2",
            "--limits-quota-bytes-per-uid", "1000000", "--limits-quota-files-per-uid", "100",
        ])
        #expect(configuration == Self.everyKeyConfiguration)
    }

    @Test("storage.cipher: a flag's auto overrides the file's cipher, and aes-256-gcm and aegis-256 load where they run")
    func cipherValues() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "storage:\n  cipher: xchacha20-poly1305\n")
        #expect(try await load(["--config", path]).cipher == .xChaCha20Poly1305)
        #expect(try await load(["--config", path, "--storage-cipher", "auto"]).cipher == nil)
        for cipher in [ContentCipher.aes256GCM, .aegis256] where cipher.isAvailable {
            #expect(try await load(["--storage-cipher", cipher.description]).cipher == cipher)
        }
    }

    @Test("variables without the PROTD_ prefix are ignored")
    func unprefixedVariablesIgnored() async throws {
        let configuration = try await load(environment: [
            "SOCKET_PATH": "/elsewhere.sock", "LOG_LEVEL": "trace", "STATE_DIRECTORY": "/elsewhere",
        ])
        #expect(configuration == DaemonConfiguration())
    }

    @Test("--socket and --state-dir are aliases of socket.path and state.directory")
    func aliases() async throws {
        let configuration = try await load(["--socket", "/tmp/a.sock", "--state-dir", "/tmp/state"])
        #expect(configuration.socketPath == "/tmp/a.sock")
        #expect(configuration.stateDirectory == "/tmp/state")
    }

    @Test("an alias overrides the variable and the file")
    func aliasOverridesEnvironment() async throws {
        let configuration = try await load(["--socket", "/tmp/a.sock"], environment: ["PROTD_SOCKET_PATH": "/tmp/b.sock"])
        #expect(configuration.socketPath == "/tmp/a.sock")
    }

    @Test("--flag=value works like --flag value, for aliases and --config too")
    func equalsForm() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "log:\n  level: notice\n")
        let configuration = try await load([
            "--config=\(path)", "--socket=/tmp/eq.sock", "--state-dir=/tmp/eq", "--lock-grace-period-seconds=0.25",
            "--passcode-failed-attempt-delays=1,2,3",
        ])
        #expect(configuration.logLevel == .notice)
        #expect(configuration.socketPath == "/tmp/eq.sock")
        #expect(configuration.stateDirectory == "/tmp/eq")
        #expect(configuration.gracePeriod == .milliseconds(250))
        #expect(configuration.failedAttemptPolicy.delaysInSeconds == [1, 2, 3])
    }

    @Test("a path with a comma is read whole from a variable")
    func commaInVariable() async throws {
        let configuration = try await load(environment: ["PROTD_SOCKET_PATH": "/tmp/a,b.sock"])
        #expect(configuration.socketPath == "/tmp/a,b.sock")
    }

    @Test("socket.mode reads a leading zero or 0o as octal and a plain integer as decimal",
          arguments: [("0660", UInt32(0o660)), ("0o640", 0o640), ("432", 0o660), ("0", 0), ("0777", 0o777)])
    func modeSpellings(text: String, mode: UInt32) async throws {
        #expect(try await load(["--socket-mode", text]).socketMode == mode)
    }

    @Test("an unquoted YAML integer is accepted for socket.mode")
    func modeAsYAMLInteger() async throws {
        let files = try ConfigFiles()
        let octal = try files.write("octal.yaml", "socket:\n  mode: 0640\n")
        let decimal = try files.write("decimal.yaml", "socket:\n  mode: 384\n")
        #expect(try await load(["--config", octal]).socketMode == 0o640)
        #expect(try await load(["--config", decimal]).socketMode == 0o600)
    }

    @Test("a grace period of 0 and fractional grace periods are allowed")
    func gracePeriods() async throws {
        #expect(try await load(["--lock-grace-period-seconds", "0"]).gracePeriod == .zero)
        #expect(try await load(["--lock-grace-period-seconds", "0.5"]).gracePeriod == .milliseconds(500))
    }

    @Test("erase-after-failed-attempts 0 means never erase")
    func eraseAfterZeroIsOff() async throws {
        let configuration = try await load(environment: ["PROTD_PASSCODE_ERASE_AFTER_FAILED_ATTEMPTS": "0"])
        #expect(configuration.failedAttemptPolicy.eraseAfter == nil)
    }

    @Test("an empty value clears an optional key set by the file")
    func emptyClearsOptional() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "socket:\n  group: wheel\ndevice-key:\n  file: /k\n")
        let configuration = try await load(["--config", path, "--socket-group="], environment: ["PROTD_DEVICE_KEY_FILE": ""])
        #expect(configuration.socketGroup == nil)
        #expect(configuration.deviceKeyFile == nil)
    }

    @Test("a file of only comments is an empty configuration")
    func commentOnlyFile() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "# nothing set yet\n\n#socket:\n#  path: /x\n")
        #expect(try await load(["--config", path]) == DaemonConfiguration())
    }

    @Test("flat dotted keys in the file work like nested ones")
    func dottedKeysInFile() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "socket.path: /tmp/dotted.sock\n")
        #expect(try await load(["--config", path]).socketPath == "/tmp/dotted.sock")
    }

    @Test("log levels are read in any case")
    func logLevelCase() async throws {
        #expect(try await load(["--log-level", "DEBUG"]).logLevel == .debug)
    }

    @Test("--help is recognised for the caller and does not stop loading")
    func help() async throws {
        #expect(DaemonConfiguration.wantsHelp(arguments: ["--socket", "/x", "--help"]))
        #expect(DaemonConfiguration.wantsHelp(arguments: ["-h"]))
        #expect(!DaemonConfiguration.wantsHelp(arguments: ["--socket", "/x"]))
        #expect(try await load(["--help"]) == DaemonConfiguration())
    }

    @Test("--version is recognised for the caller, is not help, and does not stop loading")
    func version() async throws {
        #expect(DaemonConfiguration.wantsVersion(arguments: ["--socket", "/x", "--version"]))
        #expect(!DaemonConfiguration.wantsHelp(arguments: ["--version"]))
        #expect(!DaemonConfiguration.wantsVersion(arguments: ["--help"]))
        #expect(try await load(["--version"]) == DaemonConfiguration())
    }
}
