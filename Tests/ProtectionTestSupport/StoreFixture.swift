public import ProtectionCore
public import Sodium
internal import Glibc

/// A `ProtectedStore` in a temporary state directory with a cheap (but
/// real) Argon2id cost and a manual clock. `restart()` drops the store and
/// opens the same directory again, as a daemon restart would.
public final class StoreFixture: @unchecked Sendable {
    /// The state directory.
    public let directory: TemporaryDirectory
    /// The clock the key bag sees.
    public let clock: ManualWallClock
    /// The configuration used for every (re)open.
    public let configuration: StoreConfiguration
    /// The store as currently open.
    public private(set) var store: ProtectedStore
    /// The namespace tests use by default.
    public let namespace = Namespace(uid: 1000)

    /// Every content cipher this CPU runs, for tests that cover each.
    public static let ciphers = ContentCipher.allCases.filter(\.isAvailable)

    /// A stored segment's nonce bytes with `cipher`, as docs/FORMAT.md gives them.
    public static func segmentNonceBytes(_ cipher: ContentCipher) -> Int { cipher == .aegis256 ? 32 : 24 }

    /// What a stored segment adds to its plaintext with `cipher` (nonce and
    /// tag), as docs/FORMAT.md gives it.
    public static func segmentOverhead(_ cipher: ContentCipher) -> Int { cipher == .aegis256 ? 64 : 40 }

    /// Opens a fresh store; `segmentSize` defaults to the format's 64 KiB
    /// and `cipher` to the fastest this CPU runs; no first-unlock timeout.
    public init(segmentSize: Int = 64 * 1024, policy: FailedAttemptPolicy = .standard,
                cipher: ContentCipher = .preferred, firstUnlockTimeout: Duration? = nil) throws {
        directory = try TemporaryDirectory("store")
        clock = ManualWallClock()
        configuration = StoreConfiguration(stateDirectory: directory.path, passcodeCost: .minimum,
                                           failedAttemptPolicy: policy, segmentSize: segmentSize, cipher: cipher,
                                           firstUnlockTimeout: firstUnlockTimeout)
        store = try ProtectedStore(configuration: configuration, clock: clock)
    }

    /// Shuts the store down and opens the directory again; `notify` hears
    /// what the store did on its own while opening.
    public func restart(notify: @escaping @Sendable (StoreNotice) -> Void = { _ in }) throws {
        store.shutdown()
        store = try reopen(notify: notify)
    }

    /// A new store on this directory (with `configuration`, by default the
    /// fixture's) once the previous one has shut down. For up to 2 s it
    /// retries while the directory still looks locked: a process that a
    /// concurrent test spawns holds a copy of every descriptor of the test
    /// process, the old store's locked one too, from its fork until its exec
    /// closes them (O_CLOEXEC). protd spawns nothing, so only tests meet this.
    public func reopen(_ configuration: StoreConfiguration? = nil,
                       notify: @escaping @Sendable (StoreNotice) -> Void = { _ in }) throws -> ProtectedStore {
        let deadline = ContinuousClock.now + .seconds(2)
        while true {
            do {
                return try ProtectedStore(configuration: configuration ?? self.configuration, clock: clock, notify: notify)
            } catch let error as ProtectionError
                where error.message.contains("already using the state directory") && ContinuousClock.now < deadline {
                usleep(2_000)
            }
        }
    }

    /// A passcode as guarded bytes.
    public static func secret(_ text: String) -> SecretBytes {
        try! SecretBytes(utf8: text)
    }

    /// Sets `passcode`, then restarts so the store is in `beforeFirstUnlock`.
    public func setPasscodeAndRestart(_ passcode: String = "correct horse") throws {
        try store.setPasscode(Self.secret(passcode), old: nil)
        try restart()
    }

    /// Writes a file named after each class, in that class, holding its name.
    public func writeEveryClass() throws {
        for protection in ProtectionClass.allCases {
            try store.write(Array("\(protection)".utf8), to: name("\(protection)"), in: namespace, protection: protection)
        }
    }

    /// Whether every file `writeEveryClass()` wrote reads back as written.
    public func readsEveryClass() throws -> Bool {
        try ProtectionClass.allCases.allSatisfy { protection in
            try store.read(name("\(protection)"), in: namespace) == Array("\(protection)".utf8)
        }
    }

    /// The store's device secret, read as protd reads it (`<state>/device-key`).
    public func deviceSecret() throws -> SecretBytes {
        try DeviceSecret.load(from: .file(path: directory.path + "/device-key"))
    }

    /// Parses a name, failing the test on an invalid one.
    public func name(_ text: String) -> FileName { try! FileName(text) }

    deinit {
        store.shutdown()
        directory.remove()
    }
}

extension StoreFixture {
    /// Where the store keeps `name` of `uid` (by default the fixture's
    /// namespace) on disk.
    public func diskPath(_ name: String, uid: UInt32? = nil) throws -> String {
        try layout().path(of: name, uid: uid ?? namespace.uid)
    }

    /// `<state>/store/<sealed uid>` of `uid` (by default the fixture's namespace).
    public func namespaceDirectory(uid: UInt32? = nil) throws -> String {
        try layout().namespaceDirectory(uid: uid ?? namespace.uid)
    }

    /// The directory of `uid`'s atomic-write temporary files.
    public func scratchDirectory(uid: UInt32? = nil) throws -> String {
        try namespaceDirectory(uid: uid) + "/tmp"
    }

    /// The top of `uid`'s files.
    public func filesDirectory(uid: UInt32? = nil) throws -> String {
        try namespaceDirectory(uid: uid) + "/files"
    }

    /// The store's on-disk layout, worked out offline (`StoreLayout`).
    package func layout() throws -> StoreLayout {
        try StoreLayout(stateDirectory: directory.path, deviceSecret: deviceSecret())
    }
}
