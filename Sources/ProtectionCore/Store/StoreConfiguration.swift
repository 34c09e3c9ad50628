public import Sodium

/// Everything a `ProtectedStore` needs to know to open its state directory.
public struct StoreConfiguration: Sendable {
    /// Holds the key bag (`keybag`), the fallback device secret
    /// (`device-key`) and the files (`store/`).
    public var stateDirectory: String
    /// Where the device secret comes from.
    public var deviceSecret: DeviceSecret.Source
    /// A former device secret the key bag may still be under: it is
    /// rewrapped under `deviceSecret` (`DeviceSecretMigration`).
    public var formerDeviceSecret: DeviceSecret.Source?
    /// Argon2id cost for new passcodes.
    public var passcodeCost: Argon2id.Cost
    /// Failed-attempt delays and erase-after-N.
    public var failedAttemptPolicy: FailedAttemptPolicy
    /// Plaintext bytes per segment for new files.
    public var segmentSize: Int
    /// The cipher of new files' segments.
    public var cipher: ContentCipher
    /// Storage limits per namespace; none by default.
    public var quota: StorageQuota
    /// How long after the passcode was last given the store returns to
    /// `beforeFirstUnlock` (`LockStateMachine`); nil (the default) = never.
    public var firstUnlockTimeout: Duration?

    /// A configuration with protd's defaults: device secret in
    /// `stateDirectory/device-key`, interactive Argon2id cost, the standard
    /// failed-attempt schedule, 64 KiB segments, the cipher this CPU runs
    /// fastest (`ContentCipher.preferred`).
    public init(
        stateDirectory: String,
        deviceSecret: DeviceSecret.Source? = nil,
        formerDeviceSecret: DeviceSecret.Source? = nil,
        passcodeCost: Argon2id.Cost = .interactive,
        failedAttemptPolicy: FailedAttemptPolicy = .standard,
        segmentSize: Int = 64 * 1024,
        cipher: ContentCipher = .preferred,
        quota: StorageQuota = StorageQuota(),
        firstUnlockTimeout: Duration? = nil
    ) {
        self.stateDirectory = stateDirectory
        self.deviceSecret = deviceSecret ?? .file(path: stateDirectory + "/device-key")
        self.formerDeviceSecret = formerDeviceSecret
        self.passcodeCost = passcodeCost
        self.failedAttemptPolicy = failedAttemptPolicy
        self.segmentSize = segmentSize
        self.cipher = cipher
        self.quota = quota
        self.firstUnlockTimeout = firstUnlockTimeout
    }
}

/// What `ProtectedStore.status` reports.
public struct StoreStatus: Sendable, Equatable {
    /// The lock state.
    public let state: LockState
    /// Whether a passcode is set.
    public let passcodeSet: Bool
    /// Consecutive failed unlock attempts.
    public let failedAttempts: Int
    /// Whether a recovery key can reset the passcode.
    public let recoveryKeySet: Bool
    /// Seconds before another unlock attempt is allowed.
    public let secondsUntilNextAttempt: Int64
    /// The end of the grace period while locking.
    public let lockDeadline: ContinuousClock.Instant?
    /// Sequence number of the last event.
    public let eventSequence: UInt64
    /// Why no key is used any more (an unlock found the key bag altered), or nil.
    public let fault: String?
    /// The configured first-unlock timeout; nil = off.
    public let firstUnlockTimeout: Duration?
    /// When the first-unlock timeout passes, on the boot clock; nil while it does not run.
    public let firstUnlockDeadline: BootInstant?
}

/// What a lock request or a lock-related event led to.
public struct LockProgress: Sendable, Equatable {
    /// Events to deliver to subscribers, in order.
    public let events: [ProtectionEvent]
    /// When the lock is still in its grace period: when to call
    /// `ProtectedStore.deadlinePassed(now:)`.
    public let pendingDeadline: ContinuousClock.Instant?
}

/// How `ProtectedStore.open` treats an existing or missing file.
public enum OpenMode: Sendable, Equatable {
    /// The file must exist.
    case existing
    /// The file must not exist; it is created in the class given.
    case createNew(ProtectionClass)
    /// Opens the file, or creates it in the class given.
    case openOrCreate(ProtectionClass)
}
