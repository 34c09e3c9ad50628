public import Sodium

/// The key hierarchy on disk and in memory (docs/DESIGN.md, "Key hierarchy").
///
/// Class keys A, C, D are random 256-bit keys and B is an X25519 pair. A, C
/// and B's private key are wrapped under the passcode key (Argon2id over the
/// passcode, mixed with the device secret by keyed BLAKE2b), or under a
/// device-only key while no passcode is set; D is always wrapped under a
/// device-only key. Nothing derived from the passcode is stored.
///
/// Not thread-safe: `ProtectedStore` serialises access.
public final class KeyBag {
    /// Where the key bag file lives.
    public let path: String
    /// Argon2id cost used when a passcode is set or changed.
    public let cost: Argon2id.Cost
    /// The throttling and erase policy for failed attempts.
    public let policy: FailedAttemptPolicy
    private let clock: any WallClock
    private var deviceSecret: SecretBytes
    private var deviceKeys: DeviceKeys
    private var record: KeyBagRecord
    /// The class keys in memory now.
    private(set) var keys: ClassKeys

    /// Labels that separate the keys derived from the device secret.
    private enum Label {
        static let classD = Array("protd.keybag.class-d.v1".utf8)
        static let noPasscode = Array("protd.keybag.no-passcode.v1".utf8)
        static let recordMAC = Array("protd.keybag.record-mac.v1".utf8)
        static let passcode = Array("protd.keybag.passcode.v1".utf8)
    }

    /// Keys that depend on the device secret alone.
    private struct DeviceKeys {
        let classD: SecretBytes
        let noPasscode: SecretBytes
        let recordMAC: SecretBytes

        init(_ deviceSecret: SecretBytes) throws {
            classD = try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [Label.classD])
            noPasscode = try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [Label.noPasscode])
            recordMAC = try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [Label.recordMAC])
        }
    }

    /// Loads the key bag at `path`, or creates one (no passcode, fresh keys)
    /// when there is none. With no passcode every class key is in memory
    /// after loading; with one, only D (and B's public key).
    public init(
        path: String,
        deviceSecret: SecretBytes,
        cost: Argon2id.Cost = .interactive,
        policy: FailedAttemptPolicy = .standard,
        clock: any WallClock = SystemWallClock()
    ) throws {
        try cost.validate()
        self.path = path
        self.cost = cost
        self.policy = policy
        self.clock = clock
        self.deviceSecret = deviceSecret
        self.deviceKeys = try DeviceKeys(deviceSecret)
        if Posix.exists(path) {
            record = try KeyBagRecord.decode(try Posix.readFile(path), macKey: deviceKeys.recordMAC)
            keys = try Self.loadKeys(record, deviceKeys)
        } else {
            (record, keys) = try Self.fresh(cost: cost, deviceKeys: deviceKeys)
            try persist()
        }
    }

    /// Whether a passcode is set.
    public var hasPasscode: Bool { record.hasPasscode }
    /// Consecutive failed attempts recorded on disk.
    public var failedAttempts: Int { Int(record.failedAttempts) }
    /// Seconds until another unlock attempt is allowed (0 = now).
    public var secondsUntilNextAttempt: Int64 {
        policy.secondsUntilNextAttempt(failures: failedAttempts, lastAttemptAt: record.lastAttemptAt,
                                       now: clock.secondsSinceEpoch())
    }

    /// Unlocks with `passcode`: every wrapped class key must authenticate.
    /// The attempt is recorded on disk before it is evaluated, so a crash
    /// or restart cannot reset the count. Throws `rateLimited`,
    /// `wrongPasscode` or `erasedAfterFailedAttempts`; `ioFailure` when the
    /// passcode could not be checked (Argon2id out of memory, or a full
    /// disk that cannot record the attempt), which is then not counted.
    public func unlock(passcode: SecretBytes) throws {
        guard record.hasPasscode else { return }
        let unwrapped = try verify(passcode)
        // Keys already in memory stay (operations may be using them); only
        // missing ones are installed, and spare copies are wiped.
        if keys.a == nil { keys.a = unwrapped.a } else { unwrapped.a.wipe() }
        if keys.bPrivate == nil { keys.bPrivate = unwrapped.bPrivate } else { unwrapped.bPrivate.wipe() }
        if keys.c == nil { keys.c = unwrapped.c } else { unwrapped.c.wipe() }
    }

    /// Sets the first passcode (`old` is ignored then) or changes it (`old`
    /// must be right and counts as an attempt). Only A, B-private and C are
    /// rewrapped: the cost does not depend on how much data is stored.
    public func setPasscode(_ new: SecretBytes, old: SecretBytes?) throws {
        let current: (a: SecretBytes, bPrivate: SecretBytes, c: SecretBytes)
        if record.hasPasscode {
            guard let old else {
                throw ProtectionError(.wrongPasscode, "a passcode is set: give the current one to change it")
            }
            current = try verify(old)
        } else {
            guard let a = keys.a, let b = keys.bPrivate, let c = keys.c else {
                throw ProtectionError(.keyBagCorrupt, "class keys missing while no passcode is set")
            }
            current = (a, b, c)
        }
        var updated = record
        updated.hasPasscode = true
        updated.salt = try SecureRandom.bytes(Argon2id.saltByteCount)
        updated.cost = cost
        let passcodeKey = try derivePasscodeKey(new, salt: updated.salt, cost: cost)
        defer { passcodeKey.wipe() }
        try Self.wrapPasscodeClasses(current, under: passcodeKey, into: &updated)
        // D and the B public key are bound to the prefix, which changed.
        updated.wrappedD = try XChaCha20Poly1305.wrap(keys.d, additionalData: updated.associatedData(for: .none),
                                                      key: deviceKeys.classD)
        try persist(updated)
        record = updated
        if current.a !== keys.a { current.a.wipe(); current.bPrivate.wipe(); current.c.wipe() }
    }

    /// Rewraps everything that depends on the device secret under
    /// `newSecret` and writes the key bag once, atomically: the MAC, class
    /// D, and A, B-private and C (under the new no-passcode key, or, with a
    /// passcode set, under the passcode key mixed with `newSecret`, which
    /// needs `passcode`). Internal: it checks `passcode` without counting
    /// an attempt, so it runs only right after one succeeded.
    func changeDeviceSecret(to newSecret: SecretBytes, passcode: SecretBytes?) throws {
        let newKeys = try DeviceKeys(newSecret)
        var updated = record
        if record.hasPasscode {
            guard let passcode else {
                throw ProtectionError(.wrongPasscode, "a passcode is set: changing the device secret needs it")
            }
            // Argon2id does not involve the device secret: one run serves both mixes.
            let stretched = try Argon2id.deriveKey(passcode: passcode, salt: record.salt, cost: record.cost)
            defer { stretched.wipe() }
            let oldKey = try KeyedBlake2b.deriveKey(key: deviceSecret, label: Label.passcode, secret: stretched)
            defer { oldKey.wipe() }
            let newKey = try KeyedBlake2b.deriveKey(key: newSecret, label: Label.passcode, secret: stretched)
            defer { newKey.wipe() }
            let classes = try Self.unwrapPasscodeClasses(record, key: oldKey)
            defer { classes.a.wipe(); classes.bPrivate.wipe(); classes.c.wipe() }
            try Self.wrapPasscodeClasses(classes, under: newKey, into: &updated)
        } else {
            guard let a = keys.a, let b = keys.bPrivate, let c = keys.c else {
                throw ProtectionError(.keyBagCorrupt, "class keys missing while no passcode is set")
            }
            try Self.wrapPasscodeClasses((a, b, c), under: newKeys.noPasscode, into: &updated)
        }
        updated.wrappedD = try XChaCha20Poly1305.wrap(keys.d, additionalData: updated.associatedData(for: .none),
                                                      key: newKeys.classD)
        try persist(updated, macKey: newKeys.recordMAC)
        record = updated
        deviceSecret = newSecret
        deviceKeys = newKeys
    }

    /// Wipes the class A key and class B private key (a completed lock).
    public func evictForLock() {
        keys.evictForLock()
    }

    /// Crypto-shredding: replaces every class key with new ones (no
    /// passcode), persists that, and wipes the old keys. Files made under
    /// the old keys can never be read again.
    public func erase() throws {
        let (freshRecord, freshKeys) = try Self.fresh(cost: cost, deviceKeys: deviceKeys)
        try persist(freshRecord)
        keys.wipeAll()
        record = freshRecord
        keys = freshKeys
    }

    /// Wipes every key in memory (shutdown).
    public func wipe() {
        keys.wipeAll()
    }

    // MARK: - Internals

    /// Rate-limits, records the attempt, then unwraps A, B-private and C
    /// under the passcode key. Resets the count on success.
    private func verify(_ passcode: SecretBytes) throws -> (a: SecretBytes, bPrivate: SecretBytes, c: SecretBytes) {
        let now = clock.secondsSinceEpoch()
        let wait = policy.secondsUntilNextAttempt(failures: failedAttempts, lastAttemptAt: record.lastAttemptAt, now: now)
        guard wait == 0 else {
            throw ProtectionError(.rateLimited,
                                  "\(failedAttempts) consecutive failed attempts",
                                  retryAfterSeconds: wait)
        }
        let before = record
        var attempt = record
        attempt.failedAttempts += 1
        attempt.lastAttemptAt = now
        do {
            try persist(attempt)
        } catch let error as ProtectionError {
            // A full disk: unrecorded attempts must not be checked (they
            // would not count against the limit).
            throw ProtectionError(error.code, "the attempt could not be recorded, so the passcode was not checked "
                                  + "and the attempt was not counted: \(error.message)")
        }
        record = attempt

        let passcodeKey: SecretBytes
        do {
            passcodeKey = try derivePasscodeKey(passcode, salt: record.salt, cost: record.cost)
        } catch {
            // Argon2id could not run (out of memory): the passcode was not
            // checked, so the attempt is taken back. If that write fails
            // too, it stays counted, as after a crash.
            if (try? persist(before)) != nil { record = before }
            throw ProtectionError(.ioFailure, "the passcode could not be checked, so the attempt was not counted: \(error)")
        }
        defer { passcodeKey.wipe() }
        let unwrapped: (a: SecretBytes, bPrivate: SecretBytes, c: SecretBytes)
        do {
            unwrapped = try Self.unwrapPasscodeClasses(record, key: passcodeKey)
        } catch let error as SodiumError where error.code == .authenticationFailed {
            try failAttempt()
        }
        var success = record
        success.failedAttempts = 0
        try persist(success)
        record = success
        return unwrapped
    }

    /// After a wrong passcode: erase when the policy says so, else report
    /// the count and the wait.
    private func failAttempt() throws -> Never {
        if let limit = policy.eraseAfter, failedAttempts >= limit {
            try erase()
            throw ProtectionError(.erasedAfterFailedAttempts,
                                  "wrong passcode; \(limit) consecutive failures: every key was erased as configured")
        }
        let wait = policy.delay(afterFailures: failedAttempts)
        // The wait travels as retryAfterSeconds; clients say it in their own words.
        throw ProtectionError(.wrongPasscode, "\(failedAttempts) consecutive failed attempts",
                              retryAfterSeconds: wait > 0 ? wait : nil)
    }

    private func derivePasscodeKey(_ passcode: SecretBytes, salt: [UInt8], cost: Argon2id.Cost) throws -> SecretBytes {
        let stretched = try Argon2id.deriveKey(passcode: passcode, salt: salt, cost: cost)
        defer { stretched.wipe() }
        return try KeyedBlake2b.deriveKey(key: deviceSecret, label: Label.passcode, secret: stretched)
    }

    private func persist(_ updated: KeyBagRecord? = nil, macKey: SecretBytes? = nil) throws {
        let bytes = try (updated ?? record).encode(macKey: macKey ?? deviceKeys.recordMAC)
        try AtomicFileWriter(scratchDirectory: Posix.parentDirectory(of: path)).write(bytes, to: path, durable: true)
    }

    private static func wrapPasscodeClasses(
        _ classes: (a: SecretBytes, bPrivate: SecretBytes, c: SecretBytes),
        under key: SecretBytes, into record: inout KeyBagRecord
    ) throws {
        record.wrappedA = try XChaCha20Poly1305.wrap(classes.a, additionalData: record.associatedData(for: .complete), key: key)
        record.wrappedBPrivate = try XChaCha20Poly1305.wrap(
            classes.bPrivate, additionalData: record.associatedData(for: .completeUnlessOpen), key: key)
        record.wrappedC = try XChaCha20Poly1305.wrap(
            classes.c, additionalData: record.associatedData(for: .completeUntilFirstUserAuthentication), key: key)
    }

    private static func unwrapPasscodeClasses(
        _ record: KeyBagRecord, key: SecretBytes
    ) throws -> (a: SecretBytes, bPrivate: SecretBytes, c: SecretBytes) {
        (try XChaCha20Poly1305.unwrap(record.wrappedA, additionalData: record.associatedData(for: .complete), key: key),
         try XChaCha20Poly1305.unwrap(record.wrappedBPrivate,
                                      additionalData: record.associatedData(for: .completeUnlessOpen), key: key),
         try XChaCha20Poly1305.unwrap(record.wrappedC,
                                      additionalData: record.associatedData(for: .completeUntilFirstUserAuthentication),
                                      key: key))
    }

    /// D always; A, B-private and C too while no passcode is set.
    private static func loadKeys(_ record: KeyBagRecord, _ deviceKeys: DeviceKeys) throws -> ClassKeys {
        do {
            let d = try XChaCha20Poly1305.unwrap(record.wrappedD, additionalData: record.associatedData(for: .none),
                                                 key: deviceKeys.classD)
            var keys = ClassKeys(a: nil, bPrivate: nil, bPublic: record.classBPublicKey, c: nil, d: d)
            if !record.hasPasscode {
                (keys.a, keys.bPrivate, keys.c) = try unwrapPasscodeClasses(record, key: deviceKeys.noPasscode)
            }
            return keys
        } catch let error as SodiumError where error.code == .authenticationFailed {
            throw ProtectionError(.keyBagCorrupt, "a class key in the key bag failed authentication")
        }
    }

    /// New class keys with no passcode, wrapped under the device keys.
    private static func fresh(cost: Argon2id.Cost, deviceKeys: DeviceKeys) throws -> (KeyBagRecord, ClassKeys) {
        let b = try X25519KeyPair.generate()
        let keys = ClassKeys(a: try SecretBytes.random(count: 32), bPrivate: b.privateKey, bPublic: b.publicKey,
                             c: try SecretBytes.random(count: 32), d: try SecretBytes.random(count: 32))
        var record = KeyBagRecord(
            hasPasscode: false, salt: try SecureRandom.bytes(Argon2id.saltByteCount), cost: cost,
            classBPublicKey: b.publicKey, wrappedA: [], wrappedBPrivate: [], wrappedC: [], wrappedD: [],
            failedAttempts: 0, lastAttemptAt: 0)
        try wrapPasscodeClasses((keys.a!, keys.bPrivate!, keys.c!), under: deviceKeys.noPasscode, into: &record)
        record.wrappedD = try XChaCha20Poly1305.wrap(keys.d, additionalData: record.associatedData(for: .none),
                                                     key: deviceKeys.classD)
        return (record, keys)
    }
}
