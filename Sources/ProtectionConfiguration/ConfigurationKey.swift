internal import Logging
internal import ProtectionCore
internal import Sodium

/// One configuration key and everything written about it: its dotted name
/// in the file, the flag and environment variable derived from that name,
/// the short alias flags, its type, default and meaning. `usage`, the
/// command-line check and the loader are all driven by `ConfigurationKey.all`,
/// so a key cannot be documented under one name and read under another.
struct ConfigurationKey: Sendable, Hashable {
    /// Dotted name as written in the YAML file (`lock.grace-period-seconds`).
    let name: String
    /// Placeholder shown after the flag in `usage` (`SECONDS`).
    let placeholder: String
    /// Type as shown in `usage` and messages (`number`, `list of integers`).
    let type: String
    /// Default as shown in `usage`.
    let defaultText: String
    /// What is allowed, completing "expected ...".
    let expected: String
    /// What the key means, one line.
    let help: String
    /// Extra long flags for the same key (`--socket`), tried after the main flag.
    let aliases: [String]
    /// Whether the value is a list (read as a string array).
    let isList: Bool
    /// The environment variable when it is not the one derived from the
    /// name (`PROTD_SOCKET`, which the client library reads too).
    let variableOverride: String?

    init(_ name: String, _ placeholder: String, type: String, default defaultText: String,
         expected: String, help: String, aliases: [String] = [], isList: Bool = false,
         variable: String? = nil) {
        self.variableOverride = variable
        self.name = name
        self.placeholder = placeholder
        self.type = type
        self.defaultText = defaultText
        self.expected = expected
        self.help = help
        self.aliases = aliases
        self.isList = isList
    }

    /// Components of the dotted name, as swift-configuration looks keys up.
    var components: [String] { name.split(separator: ".").map(String.init) }

    /// The long flag: `--` + the name with `.` as `-` (`--lock-grace-period-seconds`).
    /// This is what `CommandLineArgumentsProvider` derives from `components`.
    var flag: String { "--" + components.joined(separator: "-") }

    /// The environment variable: `variableOverride`, else the derived one.
    var environmentVariable: String { variableOverride ?? derivedEnvironmentVariable }

    /// `PROTD_` + the name upper-cased with `.` and `-` as `_`
    /// (`PROTD_LOCK_GRACE_PERIOD_SECONDS`): what `EnvironmentVariablesProvider`
    /// derives from `["protd"] + components`. Where `variableOverride` is set,
    /// this one is still read, as a deprecated alias.
    var derivedEnvironmentVariable: String {
        "PROTD_" + String(name.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }

    /// Every flag that sets this key, main flag first.
    var flags: [String] { [flag] + aliases }
}

extension ConfigurationKey {
    /// The built-in defaults, so `usage` shows what `init()` really uses.
    private static let defaults = DaemonConfiguration()

    static let socketPath = Self(
        "socket.path", "PATH", type: "path", default: defaults.socketPath,
        expected: "a non-empty path of at most 107 bytes, not starting with ~",
        help: "Unix socket clients connect to (relative paths are relative to the working directory).",
        aliases: ["--socket"], variable: "PROTD_SOCKET")
    static let socketMode = Self(
        "socket.mode", "MODE", type: "octal mode", default: "0" + String(defaults.socketMode, radix: 8),
        expected: "permission bits from 0 to 0777, written in octal with a leading 0 (\"0660\", 0o660) or as a decimal integer (432)",
        help: "Permission bits of the socket file.")
    static let socketGroup = Self(
        "socket.group", "GROUP", type: "group name (optional)", default: "none (keep the group the socket is created with)",
        expected: "a group name or numeric id without spaces, ':' or '/', or empty for none",
        help: "Group that owns the socket file; with mode 0660, its members may connect.")
    static let stateDirectory = Self(
        "state.directory", "DIR", type: "path", default: defaults.stateDirectory,
        expected: "a non-empty path not starting with ~",
        help: "Holds the key bag, the fallback device secret and the encrypted files.",
        aliases: ["--state-dir"])
    static let deviceKeyFile = Self(
        "device-key.file", "PATH", type: "path (optional)",
        default: "none ($CREDENTIALS_DIRECTORY/device-key when set, else STATE/device-key)",
        expected: "a path not starting with ~, or empty for none",
        help: "File holding the 32-byte device secret; created with mode 0600 when missing.")
    static let gracePeriod = Self(
        "lock.grace-period-seconds", "SECONDS", type: "number", default: "\(defaults.gracePeriod.components.seconds)",
        expected: "a number of seconds from 0 to \(DaemonConfiguration.Limits.maximumGraceSeconds)",
        help: "How long a lock waits for subscribers to close complete (class A) files (0 = lock at once; fractions allowed).")
    static let firstUnlockTimeout = Self(
        "lock.first-unlock-timeout", "DURATION", type: "duration", default: "72h",
        expected: "a number of seconds, or a number followed by s, m, h or d (90m, 72h, 1.5d), from 0 (off) to 365d",
        help: "Back to beforeFirstUnlock (class C keys wiped too) this long after the last unlock, suspend included (0 = never).")
    static let adminGroup = Self(
        "lock.admin-group", "GROUP", type: "group name", default: defaults.adminGroup,
        expected: "a non-empty group name or numeric id without spaces, ':' or '/'",
        help: "Members of this group (and root) may lock, set the passcode, manage the recovery key and check the store.")
    static let argon2Operations = Self(
        "passcode.argon2-operations", "N", type: "integer", default: "\(defaults.passcodeCost.operations)",
        expected: "an integer number of Argon2id passes that libsodium accepts (at least 1)",
        help: "Argon2id passes over memory when deriving the passcode key.")
    static let argon2MemoryKiB = Self(
        "passcode.argon2-memory-kib", "KIB", type: "integer", default: "\(defaults.passcodeCost.memoryBytes / 1024)",
        expected: "an integer number of KiB that libsodium accepts (at least 8)",
        help: "Argon2id memory in KiB (65536 = 64 MiB) when deriving the passcode key.")
    static let failedAttemptDelays = Self(
        "passcode.failed-attempt-delays", "S,S,...", type: "list of integers",
        default: defaults.failedAttemptPolicy.delaysInSeconds.map(String.init).joined(separator: ","),
        expected: "a non-empty list of whole seconds >= 0",
        help: "Wait after the n-th consecutive failed unlock; the last entry repeats.",
        isList: true)
    static let eraseAfterFailedAttempts = Self(
        "passcode.erase-after-failed-attempts", "N", type: "integer", default: "0 (off)",
        expected: "an integer >= 0 (0 = never erase)",
        help: "Erase every key after this many consecutive failed unlocks.")
    static let segmentSize = Self(
        "storage.segment-size", "BYTES", type: "integer", default: "\(defaults.segmentSize)",
        expected: "an integer number of bytes from 1024 to 16777216",
        help: "Plaintext bytes per encrypted segment of new files.")
    static let cipher = Self(
        "storage.cipher", "NAME", type: "cipher name", default: "auto",
        expected: "auto, xchacha20-poly1305, aes-256-gcm or aegis-256 (aes-256-gcm only on a CPU with AES-NI and PCLMUL, aegis-256 only with AES-NI and libsodium 1.0.19 or later)",
        help: "Cipher of new files' segments; auto is aegis-256 where it runs, else aes-256-gcm where it runs, else xchacha20-poly1305.")
    static let logLevel = Self(
        "log.level", "LEVEL", type: "log level", default: defaults.logLevel.rawValue,
        expected: "one of trace, debug, info, notice, warning, error, critical",
        help: "Least severe level that is logged.")
    static let maxFrameBytes = Self(
        "limits.max-frame-bytes", "BYTES", type: "integer", default: "\(defaults.maxFrameBytes)",
        expected: "an integer number of bytes from \(DaemonConfiguration.Limits.minimumFrameBytes) to \(DaemonConfiguration.Limits.maximumFrameBytes)",
        help: "Largest request or response frame on the socket.")
    static let maxConnections = Self(
        "limits.max-connections", "N", type: "integer", default: "\(defaults.maxConnections)",
        expected: "an integer >= 1",
        help: "Most client connections served at once (8 more are kept for administrators).")
    static let maxOpenHandlesPerConnection = Self(
        "limits.max-open-handles-per-connection", "N", type: "integer", default: "\(defaults.maxOpenHandlesPerConnection)",
        expected: "an integer >= 1",
        help: "Most open file handles plus writes in progress one connection may hold.")
    static let maxConnectionsPerUID = Self(
        "limits.max-connections-per-uid", "N", type: "integer", default: "\(defaults.maxConnectionsPerUID)",
        expected: "an integer >= 1",
        help: "Most connections one uid may hold, administrators included.")
    static let maxOpenHandlesPerUID = Self(
        "limits.max-open-handles-per-uid", "N", type: "integer", default: "\(defaults.maxOpenHandlesPerUID)",
        expected: "an integer >= 1",
        help: "Most open file handles plus writes in progress one uid may hold over all its connections.")
    static let maxSubscribersPerUID = Self(
        "limits.max-subscribers-per-uid", "N", type: "integer", default: "\(defaults.maxSubscribersPerUID)",
        expected: "an integer >= 1",
        help: "Most event subscriptions one uid may hold.")
    static let quotaBytesPerUID = Self(
        "limits.quota-bytes-per-uid", "BYTES", type: "integer", default: "0 (off)",
        expected: "an integer number of bytes >= 0 (0 = no quota)",
        help: "Most plaintext bytes one uid's files may hold together.")
    static let quotaFilesPerUID = Self(
        "limits.quota-files-per-uid", "N", type: "integer", default: "0 (off)",
        expected: "an integer >= 0 (0 = no quota)",
        help: "Most files one uid may have.")

    static let requireLockedMemory = Self(
        "memory.require-locked", "BOOL", type: "boolean", default: "\(defaults.requireLockedMemory)",
        expected: "true or false",
        help: "Refuse to hold keys in memory that cannot be locked in RAM (mlock), instead of warning.")

    /// Every key of `DaemonConfiguration`, in the order of the YAML file.
    static let all: [Self] = [
        socketPath, socketMode, socketGroup, stateDirectory, deviceKeyFile,
        gracePeriod, firstUnlockTimeout, adminGroup,
        argon2Operations, argon2MemoryKiB, failedAttemptDelays, eraseAfterFailedAttempts,
        segmentSize, cipher, logLevel,
        maxFrameBytes, maxConnections, maxOpenHandlesPerConnection,
        maxConnectionsPerUID, maxOpenHandlesPerUID, maxSubscribersPerUID, quotaBytesPerUID, quotaFilesPerUID,
        requireLockedMemory,
    ]

    /// The configuration file's own key: only a flag (`--config`) and an
    /// environment variable (`PROTD_CONFIG`); a file cannot name another file.
    static let configFile = Self(
        "config", "FILE", type: "path (optional)", default: "none (no file is read)",
        expected: "the path of a readable YAML or JSON file",
        help: "YAML (or JSON) configuration file; flags and PROTD_* variables override it.")
}
