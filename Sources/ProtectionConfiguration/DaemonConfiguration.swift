public import Logging
internal import ProtectionWire
public import ProtectionCore
public import Sodium

/// Everything protd reads at start: where the socket and state live, lock
/// and passcode policy, logging and resource limits. Read once by
/// `load(arguments:environment:)` from, highest priority first, command-line
/// flags, `PROTD_*` environment variables, a YAML (or JSON) file and the
/// defaults below; `usage` lists every key, flag and variable.
///
/// Each key `a.b-c` is also the flag `--a-b-c` and the environment variable
/// `PROTD_A_B_C`. `Config/protd.yaml` documents every key with its default.
public struct DaemonConfiguration: Sendable, Equatable {
    /// Key `socket.path` (string path, default `/run/protd/protd.sock`; flags
    /// `--socket-path` or `--socket`): the Unix socket clients connect to.
    /// At most 107 bytes; a relative path is relative to the working directory.
    public var socketPath: String
    /// Key `socket.mode` (octal mode, default `0660`): permission bits of the
    /// socket file. Written in octal with a leading zero (`"0660"`, `0o660`);
    /// a plain integer without a leading zero is decimal (`432` = `0o660`).
    public var socketMode: UInt32
    /// Key `socket.group` (group name or numeric id, optional, default none):
    /// group given to the socket file; `nil` leaves the group it was created with.
    public var socketGroup: String?
    /// Key `state.directory` (string path, default `/var/lib/protd`; flags
    /// `--state-directory` or `--state-dir`): holds the key bag, the fallback
    /// device secret and the encrypted files.
    public var stateDirectory: String
    /// Key `device-key.file` (string path, optional, default none): where the
    /// 32-byte device secret lives. See `deviceSecretSource(environment:)`
    /// for what happens when it is not set.
    public var deviceKeyFile: String?
    /// Key `lock.grace-period-seconds` (number of seconds, default 10, 0
    /// allowed, fractions allowed, at most 86400): how long a lock waits for
    /// subscribers to acknowledge before class A keys are wiped.
    public var gracePeriod: Duration
    /// Key `lock.first-unlock-timeout` (duration, default `72h`, `0` =
    /// off, which is nil here): how long after the passcode was last given
    /// (unlock, passwd), counted through suspend, protd returns to
    /// `beforeFirstUnlock`, after the grace period.
    public var firstUnlockTimeout: Duration?
    /// Key `lock.admin-group` (group name, default `protd-admin`): members
    /// (and root, and the daemon's user) may lock, set the passcode, manage
    /// the recovery key and check the store.
    public var adminGroup: String
    /// Keys `passcode.argon2-operations` (integer, default 2) and
    /// `passcode.argon2-memory-kib` (integer KiB, default 65536 = 64 MiB):
    /// Argon2id cost for new passcodes. Must pass `Argon2id.Cost.validate()`.
    public var passcodeCost: Argon2id.Cost
    /// Keys `passcode.failed-attempt-delays` (list of whole seconds, default
    /// `[0, 0, 0, 0, 60, 300, 900, 900, 3600]`) and
    /// `passcode.erase-after-failed-attempts` (integer, default 0 = never):
    /// how failed unlocks are throttled and when every key is erased.
    public var failedAttemptPolicy: FailedAttemptPolicy
    /// Key `storage.segment-size` (integer bytes, default 65536, 1024 to
    /// 16 MiB): plaintext bytes per encrypted segment of new files.
    public var segmentSize: Int
    /// Key `storage.cipher` (`auto`, `xchacha20-poly1305`, `aes-256-gcm` or
    /// `aegis-256`; default `auto`, which is `nil` here): the cipher of new
    /// files' segments. `auto` takes the fastest that runs here
    /// (`ContentCipher.preferred`): AEGIS-256, then AES-256-GCM, else
    /// XChaCha20-Poly1305.
    public var cipher: ContentCipher?
    /// Key `log.level` (one of `trace`, `debug`, `info`, `notice`, `warning`,
    /// `error`, `critical`; default `info`): least severe level logged.
    public var logLevel: Logger.Level
    /// Key `limits.max-frame-bytes` (integer bytes, default 1049600 = 1 MiB +
    /// 1 KiB, 266240 to 1 GiB): largest frame accepted on the socket.
    public var maxFrameBytes: Int
    /// Key `limits.max-connections` (integer, default 256, at least 1): most
    /// client connections served at once.
    public var maxConnections: Int
    /// Key `limits.max-open-handles-per-connection` (integer, default 1024,
    /// at least 1): most open file handles one connection may hold.
    public var maxOpenHandlesPerConnection: Int
    /// Key `limits.max-connections-per-uid` (integer, default 64, at least
    /// 1): most connections one uid may hold, administrators included.
    public var maxConnectionsPerUID: Int
    /// Key `limits.max-open-handles-per-uid` (integer, default 4096, at
    /// least 1): most open handles plus writes in progress of one uid, over
    /// all its connections.
    public var maxOpenHandlesPerUID: Int
    /// Key `limits.max-subscribers-per-uid` (integer, default 16, at least
    /// 1): most event subscriptions of one uid.
    public var maxSubscribersPerUID: Int
    /// Key `limits.quota-bytes-per-uid` (integer bytes, default 0 = off):
    /// most plaintext bytes one uid's files may hold together.
    public var quotaBytesPerUID: Int
    /// Key `limits.quota-files-per-uid` (integer, default 0 = off): most
    /// files one uid may have.
    public var quotaFilesPerUID: Int
    /// Key `memory.require-locked` (boolean, default false; true in the
    /// shipped `/etc/protd/protd.yaml`): refuse to hold keys in memory that
    /// cannot be locked in RAM (`mlock`), instead of warning and going on.
    public var requireLockedMemory: Bool

    /// A configuration with every value given or defaulted; `init()` is the
    /// built-in defaults. No validation happens here: `load` validates.
    public init(
        socketPath: String = "/run/protd/protd.sock",
        socketMode: UInt32 = 0o660,
        socketGroup: String? = nil,
        stateDirectory: String = "/var/lib/protd",
        deviceKeyFile: String? = nil,
        gracePeriod: Duration = .seconds(10),
        firstUnlockTimeout: Duration? = .seconds(72 * 3600),
        adminGroup: String = "protd-admin",
        passcodeCost: Argon2id.Cost = .interactive,
        failedAttemptPolicy: FailedAttemptPolicy = .standard,
        segmentSize: Int = 65_536,
        cipher: ContentCipher? = nil,
        logLevel: Logger.Level = .info,
        maxFrameBytes: Int = 1_048_576 + 1024,
        maxConnections: Int = 256,
        maxOpenHandlesPerConnection: Int = 1024,
        maxConnectionsPerUID: Int = 64,
        maxOpenHandlesPerUID: Int = 4096,
        maxSubscribersPerUID: Int = 16,
        quotaBytesPerUID: Int = 0,
        quotaFilesPerUID: Int = 0,
        requireLockedMemory: Bool = false
    ) {
        self.socketPath = socketPath
        self.socketMode = socketMode
        self.socketGroup = socketGroup
        self.stateDirectory = stateDirectory
        self.deviceKeyFile = deviceKeyFile
        self.gracePeriod = gracePeriod
        self.firstUnlockTimeout = firstUnlockTimeout
        self.adminGroup = adminGroup
        self.passcodeCost = passcodeCost
        self.failedAttemptPolicy = failedAttemptPolicy
        self.segmentSize = segmentSize
        self.cipher = cipher
        self.logLevel = logLevel
        self.maxFrameBytes = maxFrameBytes
        self.maxConnections = maxConnections
        self.maxOpenHandlesPerConnection = maxOpenHandlesPerConnection
        self.maxConnectionsPerUID = maxConnectionsPerUID
        self.maxOpenHandlesPerUID = maxOpenHandlesPerUID
        self.maxSubscribersPerUID = maxSubscribersPerUID
        self.quotaBytesPerUID = quotaBytesPerUID
        self.quotaFilesPerUID = quotaFilesPerUID
        self.requireLockedMemory = requireLockedMemory
    }

    /// Where the device secret comes from:
    /// 1. `deviceKeyFile` when set: `.file(path:)` (created on first use);
    /// 2. else, when `CREDENTIALS_DIRECTORY` is set and non-empty in
    ///    `environment` (systemd `LoadCredential[Encrypted]=`):
    ///    `.credential(path: "$CREDENTIALS_DIRECTORY/device-key")`, which must exist;
    /// 3. else `.file(path: stateDirectory + "/device-key")`.
    public func deviceSecretSource(environment: [String: String]) -> DeviceSecret.Source {
        if let deviceKeyFile {
            return .file(path: deviceKeyFile)
        }
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty {
            return .credential(path: Self.joined(directory, DeviceSecret.credentialName))
        }
        return .file(path: Self.joined(stateDirectory, DeviceSecret.credentialName))
    }

    /// The device secret the key bag may still be under, from before the
    /// one `deviceSecretSource(environment:)` picks; protd moves the key
    /// bag from it (`DeviceSecretMigration`):
    /// - with the credential in use: the state directory's `device-key` file;
    /// - with `deviceKeyFile` set while `CREDENTIALS_DIRECTORY` is: the
    ///   credential (read, never removed: it is systemd's);
    /// - else none. A credential that is gone cannot be migrated from.
    public func formerDeviceSecretSource(environment: [String: String]) -> DeviceSecret.Source? {
        let stateFile = Self.joined(stateDirectory, DeviceSecret.credentialName)
        switch deviceSecretSource(environment: environment) {
        case .credential:
            return .file(path: stateFile)
        case .file:
            // A file while the credential directory is set: `deviceKeyFile` chose it.
            guard let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else { return nil }
            return .credential(path: Self.joined(directory, DeviceSecret.credentialName))
        }
    }

    /// `directory/name` without a doubled slash when `directory` ends in one.
    private static func joined(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// Upper bounds that are not in the format or libsodium.
    enum Limits {
        /// Longest grace period: one day.
        static let maximumGraceSeconds = 86_400
        /// Longest first-unlock timeout: a year.
        static let maximumFirstUnlockTimeoutSeconds = 365 * 86_400
        /// Largest frame: 1 GiB.
        static let maximumFrameBytes = 1 << 30
        /// Smallest frame.
        /// One content chunk plus room for its fields.
        static let minimumFrameBytes = WireProtocol.minimumFrameLength
        /// Segment sizes the file format accepts (`SegmentLayout`).
        static let segmentSizes = 1024...(16 << 20)
        /// `sizeof(sockaddr_un.sun_path) - 1` on Linux.
        static let maximumSocketPathBytes = 107
    }
}
