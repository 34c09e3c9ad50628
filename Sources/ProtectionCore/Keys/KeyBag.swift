public import Sodium

/// The key hierarchy on disk and in memory (docs/DESIGN.md, "Key hierarchy").
///
/// Class keys A, C, D are random 256-bit keys and B is an X25519 pair. A, C
/// and B's private key are wrapped under the passcode key (Argon2id over the
/// passcode, mixed with the device secret by keyed BLAKE2b), or under a
/// device-only key while no passcode is set; D is always wrapped under a
/// device-only key. Nothing derived from the passcode is stored. Setting
/// the first passcode replaces A, B and C with fresh keys (the old ones
/// were reachable with the device secret alone); the old ones stay, under
/// the passcode, until `ProtectedStore` has rewrapped every file
/// (`KeyRotation`), then `finishRotation()` drops them.
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
    /// The bytes protd last wrote: a key bag that differs on disk was
    /// rewritten behind protd's back (its attempt record reset, say).
    private var written: [UInt8] = []
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
            written = try Posix.readFile(path)
            record = try KeyBagRecord.decode(written, macKey: deviceKeys.recordMAC)
            keys = try Self.loadKeys(record, deviceKeys)
            if record.version != KeyBagRecord.currentVersion, let current = keys.passcodeKeys {
                // Without a passcode the keys and the key wrapping them are here: upgrade now.
                var upgraded = record
                upgraded.version = KeyBagRecord.currentVersion
                try Self.wrap(current, under: deviceKeys.noPasscode, into: &upgraded)
                try wrapClassD(into: &upgraded, key: deviceKeys.classD)
                try persist(upgraded)
                record = upgraded
            }
        } else {
            (record, keys) = try Self.fresh(cost: cost, deviceKeys: deviceKeys)
            try persist()
        }
    }

    /// Whether a passcode is set.
    public var hasPasscode: Bool { record.hasPasscode }
    /// Whether files may still be wrapped under the keys the first
    /// passcode replaced (`KeyRotation`).
    var rotationPending: Bool { record.previousWrapped != nil }
    /// Consecutive failed attempts recorded on disk.
    public var failedAttempts: Int { Int(record.failedAttempts) }
    /// Seconds until another unlock attempt is allowed (0 = now).
    public var secondsUntilNextAttempt: Int64 {
        policy.secondsUntilNextAttempt(failures: failedAttempts, lastAttemptAt: record.lastAttemptAt,
                                       now: clock.secondsSinceEpoch())
    }

    /// Unlocks with `passcode`: every wrapped class key must authenticate,
    /// and the class B public key must be the private key's. The attempt
    /// is recorded on disk before it is evaluated, so a crash or restart
    /// cannot reset the count. Throws `rateLimited`, `wrongPasscode` or
    /// `erasedAfterFailedAttempts`; `ioFailure` when the passcode could not
    /// be checked (Argon2id out of memory, or a full disk that cannot
    /// record the attempt), which is then not counted; `keyBagCorrupt`
    /// when the key bag was altered by someone holding the device secret.
    public func unlock(passcode: SecretBytes) throws {
        guard record.hasPasscode else { return }
        let unwrapped = try verify(passcode)
        // Keys already in memory stay (operations may be using them); only
        // missing ones are installed, and spare copies are wiped.
        install(unwrapped.current.a, at: \.a)
        install(unwrapped.current.bPrivate, at: \.bPrivate)
        install(unwrapped.current.c, at: \.c)
        if let previous = unwrapped.previous {
            if keys.previous == nil { keys.previous = PreviousClassKeys() }
            install(previous.a, at: \.previous!.a)
            install(previous.bPrivate, at: \.previous!.bPrivate)
            install(previous.c, at: \.previous!.c)
        }
    }

    private func install(_ key: SecretBytes, at path: WritableKeyPath<ClassKeys, SecretBytes?>) {
        if keys[keyPath: path] == nil { keys[keyPath: path] = key } else { key.wipe() }
    }

    /// Sets the first passcode (`old` is ignored then) or changes it (`old`
    /// must be right and counts as an attempt). A change rewraps A,
    /// B-private and C (and the previous keys while a rotation is
    /// pending): its cost does not depend on how much data is stored. The
    /// first passcode makes fresh A, B and C keys and keeps the old ones
    /// as the previous keys, all under the passcode: the caller then
    /// rewraps every file (`KeyRotation`) and calls `finishRotation()`.
    public func setPasscode(_ new: SecretBytes, old: SecretBytes?) throws {
        var updated = record
        updated.version = KeyBagRecord.currentVersion
        updated.hasPasscode = true
        updated.salt = try SecureRandom.bytes(Argon2id.saltByteCount)
        updated.cost = cost
        let passcodeKey = try derivePasscodeKey(new, salt: updated.salt, cost: cost)
        defer { passcodeKey.wipe() }
        if record.hasPasscode {
            guard let old else {
                throw ProtectionError(.wrongPasscode, "a passcode is set: give the current one to change it")
            }
            let unwrapped = try verify(old)
            defer { unwrapped.current.wipe(); unwrapped.previous?.wipe() }
            try Self.wrap(unwrapped.current, under: passcodeKey, into: &updated)
            try Self.wrap(previous: unwrapped.previous, under: passcodeKey, into: &updated)
            try wrapClassD(into: &updated, key: deviceKeys.classD)
            try persist(updated)
            record = updated
            return
        }
        guard let old = keys.passcodeKeys else {
            throw ProtectionError(.keyBagCorrupt, "class keys missing while no passcode is set")
        }
        let pair = try X25519KeyPair.generate()
        let fresh = PasscodeKeys(a: try SecretBytes.random(count: 32), bPrivate: pair.privateKey,
                                 c: try SecretBytes.random(count: 32))
        updated.classBPublicKey = pair.publicKey
        try Self.wrap(fresh, under: passcodeKey, into: &updated)
        try Self.wrap(previous: old, under: passcodeKey, into: &updated)
        try wrapClassD(into: &updated, key: deviceKeys.classD)
        do {
            try persist(updated)
        } catch {
            fresh.wipe()
            throw error
        }
        record = updated
        // Operations that took the old keys keep them (they now unwrap only).
        keys = ClassKeys(a: fresh.a, bPrivate: fresh.bPrivate, bPublic: pair.publicKey, c: fresh.c, d: keys.d,
                         previous: PreviousClassKeys(a: old.a, bPrivate: old.bPrivate, c: old.c))
    }

    /// Every file is wrapped under the current keys: drops the previous
    /// ones, on disk and in memory.
    func finishRotation() throws {
        guard record.previousWrapped != nil else { return }
        var updated = record
        updated.previousWrapped = nil
        try persist(updated)
        record = updated
        keys.previous?.wipeAll()
        keys.previous = nil
    }

    /// Rewraps everything that depends on the device secret under
    /// `newSecret` and writes the key bag once, atomically: the MAC, class
    /// D, and A, B-private and C (under the new no-passcode key, or, with a
    /// passcode set, under the passcode key mixed with `newSecret`, which
    /// needs `passcode`; the previous keys too). Internal: it checks
    /// `passcode` without counting an attempt, so it runs only right after
    /// one succeeded.
    func changeDeviceSecret(to newSecret: SecretBytes, passcode: SecretBytes?) throws {
        let newKeys = try DeviceKeys(newSecret)
        var updated = record
        updated.version = KeyBagRecord.currentVersion
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
            let unwrapped = try Self.unwrap(record, key: oldKey)
            defer { unwrapped.current.wipe(); unwrapped.previous?.wipe() }
            try Self.wrap(unwrapped.current, under: newKey, into: &updated)
            try Self.wrap(previous: unwrapped.previous, under: newKey, into: &updated)
        } else {
            guard let current = keys.passcodeKeys else {
                throw ProtectionError(.keyBagCorrupt, "class keys missing while no passcode is set")
            }
            try Self.wrap(current, under: newKeys.noPasscode, into: &updated)
        }
        try wrapClassD(into: &updated, key: newKeys.classD)
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

    /// The passcode-protected keys unwrapped from a record: the current
    /// A, B-private and C, and the previous ones while a rotation is pending.
    private struct Unwrapped {
        let current: PasscodeKeys
        let previous: PasscodeKeys?
    }

    /// Rate-limits, records the attempt, then unwraps A, B-private and C
    /// (and the previous keys) under the passcode key and checks the class
    /// B public key. Resets the count on success, writing a version 1 key
    /// bag as version 2 on the way.
    private func verify(_ passcode: SecretBytes) throws -> Unwrapped {
        let now = clock.secondsSinceEpoch()
        let wait = policy.secondsUntilNextAttempt(failures: failedAttempts, lastAttemptAt: record.lastAttemptAt, now: now)
        guard wait == 0 else {
            throw ProtectionError(.rateLimited,
                                  "\(failedAttempts) consecutive failed attempts",
                                  retryAfterSeconds: wait)
        }
        try checkUnchangedOnDisk()
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
        let unwrapped: Unwrapped
        do {
            unwrapped = try Self.unwrap(record, key: passcodeKey)
        } catch let error as SodiumError where error.code == .authenticationFailed {
            try failAttempt()
        }
        var success = record
        success.failedAttempts = 0
        do {
            guard try X25519KeyPair(privateKey: unwrapped.current.bPrivate).publicKey == record.classBPublicKey else {
                throw ProtectionError(.keyBagCorrupt, "the key bag's class B public key is not the one of its private key: "
                                      + "someone holding the device secret replaced it, so class B files created "
                                      + "since may be readable by them")
            }
            if success.version != KeyBagRecord.currentVersion {
                success.version = KeyBagRecord.currentVersion
                try Self.wrap(unwrapped.current, under: passcodeKey, into: &success)
                try wrapClassD(into: &success, key: deviceKeys.classD)
            }
            try persist(success)
        } catch {
            unwrapped.current.wipe()
            unwrapped.previous?.wipe()
            throw error
        }
        record = success
        return unwrapped
    }

    /// Throws `keyBagCorrupt` when the key bag on disk is not the one
    /// protd last wrote: someone holding the device secret rewrote it
    /// (reset its failed-attempt count, say) while protd ran. A restart
    /// reads whatever is on disk: only storage the device secret cannot
    /// rewrite (a TPM counter) could tell then (docs/SECURITY.md).
    private func checkUnchangedOnDisk() throws {
        let onDisk = try? Posix.readFile(path)
        guard onDisk == written else {
            throw ProtectionError(.keyBagCorrupt, "the key bag on disk is not the one protd wrote: it was replaced or "
                                  + "rewritten while protd ran (its failed-attempt record reset, say)")
        }
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
        written = bytes
    }

    private func wrapClassD(into record: inout KeyBagRecord, key: SecretBytes) throws {
        record.wrappedD = try XChaCha20Poly1305.wrap(keys.d, additionalData: record.associatedData(for: .none), key: key)
    }

    private static func wrap(_ classes: PasscodeKeys, under key: SecretBytes, into record: inout KeyBagRecord) throws {
        record.wrappedA = try XChaCha20Poly1305.wrap(classes.a, additionalData: record.associatedData(for: .complete), key: key)
        record.wrappedBPrivate = try XChaCha20Poly1305.wrap(
            classes.bPrivate, additionalData: record.associatedData(for: .completeUnlessOpen), key: key)
        record.wrappedC = try XChaCha20Poly1305.wrap(
            classes.c, additionalData: record.associatedData(for: .completeUntilFirstUserAuthentication), key: key)
    }

    /// Sets (or, with nil, clears) the record's previous keys.
    private static func wrap(previous: PasscodeKeys?, under key: SecretBytes, into record: inout KeyBagRecord) throws {
        guard let previous else {
            record.previousWrapped = nil
            return
        }
        var bytes: [UInt8] = []
        for (secret, protection) in previous.byClass {
            bytes += try XChaCha20Poly1305.wrap(secret, additionalData: record.associatedData(for: protection, previous: true),
                                                key: key)
        }
        record.previousWrapped = bytes
    }

    private static func unwrap(_ record: KeyBagRecord, key: SecretBytes) throws -> Unwrapped {
        func open(_ wrapped: [UInt8], _ protection: ProtectionClass, previous: Bool = false) throws -> SecretBytes {
            try XChaCha20Poly1305.unwrap(wrapped, additionalData: record.associatedData(for: protection, previous: previous),
                                         key: key)
        }
        let current = PasscodeKeys(a: try open(record.wrappedA, .complete),
                                   bPrivate: try open(record.wrappedBPrivate, .completeUnlessOpen),
                                   c: try open(record.wrappedC, .completeUntilFirstUserAuthentication))
        guard let wrapped = record.previousWrapped else { return Unwrapped(current: current, previous: nil) }
        let size = KeyBagRecord.wrappedKeyByteCount
        do {
            let previous = PasscodeKeys(
                a: try open(Array(wrapped[0..<size]), .complete, previous: true),
                bPrivate: try open(Array(wrapped[size..<2 * size]), .completeUnlessOpen, previous: true),
                c: try open(Array(wrapped[(2 * size)...]), .completeUntilFirstUserAuthentication, previous: true))
            return Unwrapped(current: current, previous: previous)
        } catch {
            current.wipe()
            throw error
        }
    }

    /// D always; A, B-private and C too while no passcode is set.
    private static func loadKeys(_ record: KeyBagRecord, _ deviceKeys: DeviceKeys) throws -> ClassKeys {
        do {
            let d = try XChaCha20Poly1305.unwrap(record.wrappedD, additionalData: record.associatedData(for: .none),
                                                 key: deviceKeys.classD)
            var keys = ClassKeys(a: nil, bPrivate: nil, bPublic: record.classBPublicKey, c: nil, d: d)
            if !record.hasPasscode {
                let current = try unwrap(record, key: deviceKeys.noPasscode).current
                (keys.a, keys.bPrivate, keys.c) = (current.a, current.bPrivate, current.c)
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
        try wrap(keys.passcodeKeys!, under: deviceKeys.noPasscode, into: &record)
        record.wrappedD = try XChaCha20Poly1305.wrap(keys.d, additionalData: record.associatedData(for: .none),
                                                     key: deviceKeys.classD)
        return (record, keys)
    }
}

/// The three class keys a passcode protects.
struct PasscodeKeys {
    let a: SecretBytes
    let bPrivate: SecretBytes
    let c: SecretBytes

    /// Each key with its class, in key bag order.
    var byClass: [(SecretBytes, ProtectionClass)] {
        [(a, .complete), (bPrivate, .completeUnlessOpen), (c, .completeUntilFirstUserAuthentication)]
    }

    func wipe() {
        a.wipe(); bPrivate.wipe(); c.wipe()
    }
}

extension ClassKeys {
    /// A, B-private and C when all three are in memory.
    var passcodeKeys: PasscodeKeys? {
        guard let a, let bPrivate, let c else { return nil }
        return PasscodeKeys(a: a, bPrivate: bPrivate, c: c)
    }
}
