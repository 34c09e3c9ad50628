import Logging
import ProtectionConfiguration
import ProtectionCore
import Sodium
import Testing

@Suite("The configuration files in Config/")
struct ShippedFilesTests {
    @Test("Config/protd.yaml loads and equals the built-in defaults, but for requiring locked key memory")
    func productionFileIsTheDefaults() async throws {
        let configuration = try await load(["--config", repositoryRoot + "/Config/protd.yaml"])
        var expected = DaemonConfiguration()
        expected.requireLockedMemory = true
        #expect(configuration == expected)
    }

    @Test("Config/protd.yaml sets every key, so it documents them all", arguments: [
        "socket.path", "socket.mode", "socket.group", "state.directory", "device-key.file",
        "lock.grace-period-seconds", "lock.first-unlock-timeout", "lock.admin-group", "passcode.argon2-operations",
        "passcode.argon2-memory-kib", "passcode.failed-attempt-delays",
        "passcode.erase-after-failed-attempts", "storage.segment-size", "storage.cipher", "log.level",
        "limits.max-frame-bytes", "limits.max-connections", "limits.max-open-handles-per-connection",
        "limits.max-connections-per-uid", "limits.max-open-handles-per-uid", "limits.max-subscribers-per-uid",
        "limits.quota-bytes-per-uid", "limits.quota-files-per-uid", "memory.require-locked",
    ])
    func productionFileSetsKey(key: String) async throws {
        // Spoil the key's value in a copy; loading must then fail naming the
        // key, which proves the file sets it where the loader looks.
        let text = try repositoryFile("Config/protd.yaml")
        let leaf = String(key.split(separator: ".").last!)
        var spoiled = 0
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard line.hasPrefix("  \(leaf):") else { return String(line) }
            spoiled += 1
            return "  \(leaf): \"~ :spoiled\""
        }
        try #require(spoiled == 1, "Config/protd.yaml should set \(key) once")
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", lines.joined(separator: "\n"))
        let error = try #require(await loadError(["--config", path]))
        #expect(error.key == key)
    }

    @Test("Config/protd.dev.yaml loads with the development settings")
    func developmentFile() async throws {
        let configuration = try await load(["--config", repositoryRoot + "/Config/protd.dev.yaml"])
        var expected = DaemonConfiguration()
        expected.socketPath = ".run/protd.sock"
        expected.stateDirectory = ".run/state"
        expected.gracePeriod = .seconds(10)
        expected.adminGroup = "protd-admin"
        expected.logLevel = .debug
        expected.passcodeCost = Argon2id.Cost(operations: 1, memoryBytes: 8192 * 1024)
        #expect(configuration == expected)
        #expect(configuration.deviceSecretSource(environment: [:]) == .file(path: ".run/state/device-key"))
    }
}

@Suite("Where the device secret comes from")
struct DeviceSecretSourceTests {
    @Test("device-key.file wins over a systemd credential")
    func explicitFile() {
        let configuration = DaemonConfiguration(deviceKeyFile: "/etc/protd/device-key")
        let source = configuration.deviceSecretSource(environment: ["CREDENTIALS_DIRECTORY": "/run/credentials/protd.service"])
        #expect(source == .file(path: "/etc/protd/device-key"))
    }

    @Test("with CREDENTIALS_DIRECTORY set, the credential device-key is used")
    func credential() {
        let source = DaemonConfiguration().deviceSecretSource(
            environment: ["CREDENTIALS_DIRECTORY": "/run/credentials/protd.service"])
        #expect(source == .credential(path: "/run/credentials/protd.service/device-key"))
    }

    @Test("with neither, the secret lives in the state directory")
    func stateDirectory() {
        let configuration = DaemonConfiguration(stateDirectory: "/srv/protd")
        #expect(configuration.deviceSecretSource(environment: [:]) == .file(path: "/srv/protd/device-key"))
    }

    @Test("an empty CREDENTIALS_DIRECTORY counts as unset")
    func emptyCredentialsDirectory() {
        let source = DaemonConfiguration().deviceSecretSource(environment: ["CREDENTIALS_DIRECTORY": ""])
        #expect(source == .file(path: "/var/lib/protd/device-key"))
    }

    @Test("with the credential in use, the key bag may still be under the state directory's file")
    func formerIsTheStateFile() {
        let former = DaemonConfiguration(stateDirectory: "/srv/protd").formerDeviceSecretSource(
            environment: ["CREDENTIALS_DIRECTORY": "/run/credentials/protd.service"])
        #expect(former == .file(path: "/srv/protd/device-key"))
    }

    @Test("with device-key.file set while the credential is loaded, the key bag may still be under the credential")
    func formerIsTheCredential() {
        let former = DaemonConfiguration(deviceKeyFile: "/etc/protd/device-key").formerDeviceSecretSource(
            environment: ["CREDENTIALS_DIRECTORY": "/c"])
        #expect(former == .credential(path: "/c/device-key"))
    }

    @Test("without a credential there is nothing to move from")
    func noFormer() {
        #expect(DaemonConfiguration().formerDeviceSecretSource(environment: [:]) == nil)
        #expect(DaemonConfiguration(deviceKeyFile: "/k").formerDeviceSecretSource(environment: [:]) == nil)
    }

    @Test("device-key.file set by a variable reaches the source")
    func fileFromEnvironment() async throws {
        let configuration = try await load(environment: ["PROTD_DEVICE_KEY_FILE": "/k/device-key"])
        #expect(configuration.deviceSecretSource(environment: ["CREDENTIALS_DIRECTORY": "/c"]) == .file(path: "/k/device-key"))
    }
}

@Suite("Usage text")
struct UsageTests {
    @Test("usage lists every key with its flag, variable and default")
    func listsEveryKey() {
        let usage = DaemonConfiguration.usage
        let keys: [(key: String, flag: String, variable: String, value: String)] = [
            ("socket.path", "--socket-path", "PROTD_SOCKET", "/run/protd/protd.sock"),
            ("socket.mode", "--socket-mode", "PROTD_SOCKET_MODE", "0660"),
            ("socket.group", "--socket-group", "PROTD_SOCKET_GROUP", "none"),
            ("state.directory", "--state-directory", "PROTD_STATE_DIRECTORY", "/var/lib/protd"),
            ("device-key.file", "--device-key-file", "PROTD_DEVICE_KEY_FILE", "none"),
            ("lock.grace-period-seconds", "--lock-grace-period-seconds", "PROTD_LOCK_GRACE_PERIOD_SECONDS", "10"),
            ("lock.admin-group", "--lock-admin-group", "PROTD_LOCK_ADMIN_GROUP", "protd-admin"),
            ("passcode.argon2-operations", "--passcode-argon2-operations", "PROTD_PASSCODE_ARGON2_OPERATIONS", "2"),
            ("passcode.argon2-memory-kib", "--passcode-argon2-memory-kib", "PROTD_PASSCODE_ARGON2_MEMORY_KIB", "65536"),
            ("passcode.failed-attempt-delays", "--passcode-failed-attempt-delays",
             "PROTD_PASSCODE_FAILED_ATTEMPT_DELAYS", "0,0,0,0,60,300,900,900,3600"),
            ("passcode.erase-after-failed-attempts", "--passcode-erase-after-failed-attempts",
             "PROTD_PASSCODE_ERASE_AFTER_FAILED_ATTEMPTS", "0"),
            ("storage.segment-size", "--storage-segment-size", "PROTD_STORAGE_SEGMENT_SIZE", "65536"),
            ("storage.cipher", "--storage-cipher", "PROTD_STORAGE_CIPHER", "auto"),
            ("log.level", "--log-level", "PROTD_LOG_LEVEL", "info"),
            ("limits.max-frame-bytes", "--limits-max-frame-bytes", "PROTD_LIMITS_MAX_FRAME_BYTES", "1049600"),
            ("limits.max-connections", "--limits-max-connections", "PROTD_LIMITS_MAX_CONNECTIONS", "256"),
            ("limits.max-open-handles-per-connection", "--limits-max-open-handles-per-connection",
             "PROTD_LIMITS_MAX_OPEN_HANDLES_PER_CONNECTION", "1024"),
            ("limits.max-connections-per-uid", "--limits-max-connections-per-uid",
             "PROTD_LIMITS_MAX_CONNECTIONS_PER_UID", "64"),
            ("limits.max-open-handles-per-uid", "--limits-max-open-handles-per-uid",
             "PROTD_LIMITS_MAX_OPEN_HANDLES_PER_UID", "4096"),
            ("limits.max-subscribers-per-uid", "--limits-max-subscribers-per-uid",
             "PROTD_LIMITS_MAX_SUBSCRIBERS_PER_UID", "16"),
            ("limits.quota-bytes-per-uid", "--limits-quota-bytes-per-uid", "PROTD_LIMITS_QUOTA_BYTES_PER_UID", "0"),
            ("limits.quota-files-per-uid", "--limits-quota-files-per-uid", "PROTD_LIMITS_QUOTA_FILES_PER_UID", "0"),
        ]
        for entry in keys {
            #expect(usage.contains("key \(entry.key), env \(entry.variable), "), "usage misses \(entry.key)")
            #expect(usage.contains("\(entry.flag) "), "usage misses \(entry.flag)")
            #expect(usage.contains("default \(entry.value)"), "usage misses the default of \(entry.key)")
        }
        for alias in ["--socket PATH", "--state-dir DIR", "--config FILE", "PROTD_CONFIG", "--help"] {
            #expect(usage.contains(alias))
        }
    }
}
