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
/// (`HeaderRewrap`), then `finishRotation()` drops them.
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
    /// Failed attempts at login, per login user (`AttemptCounter.login`).
    private var loginAttempts = LoginAttempts()
    private var loginAttemptsPath: String { Posix.parentDirectory(of: path) + "/login-attempts" }
    /// The login attempts under a new device secret, written before the key
    /// bag moves to it (`changeDeviceSecret`) and renamed over
    /// `loginAttemptsPath` after: a crash between the two leaves counts
    /// under whichever secret the key bag has.
    private var nextLoginAttemptsPath: String { loginAttemptsPath + ".next" }
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
        static let recovery = Array("protd.keybag.recovery.v1".utf8)
        static let recoveryOuter = Array("protd.keybag.recovery-outer.v1".utf8)
    }

    /// Keys that depend on the device secret alone.
    private struct DeviceKeys {
        let classD: SecretBytes
        let noPasscode: SecretBytes
        let recordMAC: SecretBytes
        /// Wraps the recovery wrapping, so a recovery key is useless without the device secret.
        let recoveryOuter: SecretBytes

        init(_ deviceSecret: SecretBytes) throws {
            classD = try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [Label.classD])
            noPasscode = try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [Label.noPasscode])
            recordMAC = try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [Label.recordMAC])
            recoveryOuter = try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [Label.recoveryOuter])
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
            keys.unboundFilesAllowed = !record.filesBound
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
        loginAttempts = loadLoginAttempts()
    }

    /// The login attempts on disk under the current device secret: from
    /// the file, or from the next file a device secret change wrote before
    /// it stopped (then moved into place). One that does not authenticate
    /// is dropped: counts start afresh.
    private func loadLoginAttempts() -> LoginAttempts {
        guard let macKey = try? LoginAttempts.macKey(deviceSecret: deviceSecret) else { return LoginAttempts() }
        defer { macKey.wipe() }
        let read = { (path: String) in (try? Posix.readFile(path)).flatMap { try? LoginAttempts.decode($0, macKey: macKey) } }
        let current = read(loginAttemptsPath)
        if current == nil, let next = read(nextLoginAttemptsPath),
           (try? Posix.rename(nextLoginAttemptsPath, loginAttemptsPath)) != nil {
            return next
        }
        try? Posix.unlink(nextLoginAttemptsPath)
        return current ?? LoginAttempts()
    }

    /// Whether a passcode is set.
    public var hasPasscode: Bool { record.hasPasscode }
    /// Whether files may still be wrapped under the keys the first
    /// passcode replaced (`HeaderRewrap`).
    var rotationPending: Bool { record.previousWrapped != nil }
    /// Whether a recovery key can reset the passcode.
    public var hasRecoveryKey: Bool { record.recoveryWrapped != nil }
    /// Whether every file is known to be bound to its name and owner
    /// (version 2 headers), so version 1 headers are refused.
    var filesBound: Bool { record.filesBound }
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
    /// `counter` says whose failed-attempt count the attempt goes to: the
    /// machine's, or (an unlock at login) the login user's own.
    public func unlock(passcode: SecretBytes, countedAgainst counter: AttemptCounter = .machine) throws {
        guard record.hasPasscode else { return }
        let unwrapped = try verify(passcode, countedAgainst: counter)
        // Keys already in memory stay (operations may be using them); only
        // missing ones are installed, and spare copies are wiped.
        install(unwrapped.current, at: \.a, \.bPrivate, \.c)
        if let previous = unwrapped.previous {
            if keys.previous == nil { keys.previous = PreviousClassKeys() }
            install(previous, at: \.previous!.a, \.previous!.bPrivate, \.previous!.c)
        }
    }

    /// Puts A, B-private and C of `unwrapped` where the key paths say,
    /// each only where that key is missing; a spare copy is wiped.
    private func install(_ unwrapped: PasscodeKeys, at a: WritableKeyPath<ClassKeys, SecretBytes?>,
                         _ bPrivate: WritableKeyPath<ClassKeys, SecretBytes?>, _ c: WritableKeyPath<ClassKeys, SecretBytes?>) {
        for (key, path) in [(unwrapped.a, a), (unwrapped.bPrivate, bPrivate), (unwrapped.c, c)] {
            if keys[keyPath: path] == nil { keys[keyPath: path] = key } else { key.wipe() }
        }
    }

    /// Sets the first passcode (`old` is ignored then) or changes it (`old`
    /// must be right and counts as an attempt). A change rewraps A,
    /// B-private and C (and the previous keys while a rotation is
    /// pending): its cost does not depend on how much data is stored. The
    /// first passcode makes fresh A, B and C keys and keeps the old ones
    /// as the previous keys, all under the passcode: the caller then
    /// rewraps every file (`HeaderRewrap`) and calls `finishRotation()`.
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
            // The verify just reset the count: keep that, not the count from before it.
            updated.failedAttempts = record.failedAttempts
            updated.lastAttemptAt = record.lastAttemptAt
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
                         previous: PreviousClassKeys(a: old.a, bPrivate: old.bPrivate, c: old.c),
                         unboundFilesAllowed: keys.unboundFilesAllowed)
    }

    /// Every file has a version 2 header: version 1 ones are refused from now on.
    func markFilesBound() throws {
        try setFlag(\.filesBound)
        keys.unboundFilesAllowed = !record.filesBound
    }

    /// The store's names are sealed (store layout 2), so a protd that
    /// predates sealed names refuses this key bag.
    func markNamesSealed() throws {
        try setFlag(\.namesSealed)
    }

    /// Whether the key bag records sealed names (store layout 2).
    package var namesSealed: Bool { record.namesSealed }

    /// Clears the sealed-names flag, as a key bag of a protd that predates
    /// sealed names has it (tests of the move from the first layout).
    package func clearNamesSealedForTesting() throws {
        var updated = record
        updated.namesSealed = false
        try persist(updated)
        record = updated
    }

    /// Sets a version 2 flag on disk and in memory. A version 1 record has
    /// no flags; it becomes version 2 at the next unlock.
    private func setFlag(_ flag: WritableKeyPath<KeyBagRecord, Bool>) throws {
        guard !record[keyPath: flag], record.version == KeyBagRecord.currentVersion else { return }
        var updated = record
        updated[keyPath: flag] = true
        try persist(updated)
        record = updated
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

    /// Makes a random 256-bit recovery key and adds a second wrapping of
    /// A, B-private and C under it (replacing an older one), after
    /// checking `passcode` as an attempt. The recovery key is returned
    /// once and stored nowhere; alone, without the device secret, it opens
    /// nothing. Throws `noPasscodeSet` without a passcode, and
    /// `protectedDataUnavailable` while the first passcode's key rotation
    /// is unfinished (the previous keys would not be covered).
    public func createRecovery(passcode: SecretBytes) throws -> SecretBytes {
        guard record.hasPasscode else {
            throw ProtectionError(.noPasscodeSet, "a recovery key resets the passcode; set one with passwd first")
        }
        guard record.previousWrapped == nil else {
            throw ProtectionError(.protectedDataUnavailable,
                                  "files are still being moved to the keys the first passcode made; unlock, then try again")
        }
        let unwrapped = try verify(passcode)
        defer { unwrapped.current.wipe() }
        let recoveryKey = try SecretBytes.random(count: 32)
        var updated = record
        do {
            updated.recoveryWrapped = try recoveryWrapping(of: unwrapped.current, recoveryKey: recoveryKey,
                                                          in: updated, outerKey: deviceKeys.recoveryOuter)
            try persist(updated)
        } catch {
            recoveryKey.wipe()
            throw error
        }
        record = updated
        return recoveryKey
    }

    /// Deletes the recovery wrapping: the recovery key opens nothing after.
    public func removeRecovery() throws {
        guard record.recoveryWrapped != nil else { return }
        var updated = record
        updated.recoveryWrapped = nil
        try persist(updated)
        record = updated
    }

    /// Sets `new` as the passcode after checking `recoveryKey` as an
    /// attempt (same schedule and record as unlock), and unlocks: every
    /// file stays readable, and the recovery key stays valid. Throws
    /// `notFound` when no recovery key is set, `wrongPasscode` for a
    /// wrong one.
    public func resetPasscode(recoveryKey: SecretBytes, new: SecretBytes) throws {
        guard record.recoveryWrapped != nil else {
            throw ProtectionError(.notFound, "no recovery key is set")
        }
        let unwrapped = try attempt(checking: "recovery key") { record in
            try Self.unwrapRecovery(record, recoveryKey: recoveryKey, outerKey: deviceKeys.recoveryOuter)
        }
        var updated = record
        updated.salt = try SecureRandom.bytes(Argon2id.saltByteCount)
        updated.cost = cost
        do {
            let passcodeKey = try derivePasscodeKey(new, salt: updated.salt, cost: cost)
            defer { passcodeKey.wipe() }
            try Self.wrap(unwrapped.current, under: passcodeKey, into: &updated)
            try wrapClassD(into: &updated, key: deviceKeys.classD)
            try persist(updated)
        } catch {
            unwrapped.current.wipe()
            throw error
        }
        record = updated
        install(unwrapped.current, at: \.a, \.bPrivate, \.c)
    }

    /// The recovery wrapping of `keys`: each wrapped under a key from
    /// `recoveryKey`, the three wrapped again under `outerKey`.
    private func recoveryWrapping(of keys: PasscodeKeys, recoveryKey: SecretBytes, in record: KeyBagRecord,
                                  outerKey: SecretBytes) throws -> [UInt8] {
        let innerKey = try KeyedBlake2b.deriveKey(key: recoveryKey, parts: [Label.recovery])
        defer { innerKey.wipe() }
        var inner: [UInt8] = []
        defer { zeroFill(&inner) }
        for (secret, protection) in keys.byClass {
            inner += try XChaCha20Poly1305.wrap(secret, additionalData: record.recoveryAssociatedData(for: protection),
                                                key: innerKey)
        }
        let innerSecret = try inner.withUnsafeBytes { try SecretBytes(copying: $0) }
        defer { innerSecret.wipe() }
        return try XChaCha20Poly1305.wrap(innerSecret, additionalData: record.recoveryAssociatedData(), key: outerKey)
    }

    /// A, B-private and C from the recovery wrapping; `SodiumError`
    /// `authenticationFailed` for a wrong recovery key.
    private static func unwrapRecovery(_ record: KeyBagRecord, recoveryKey: SecretBytes,
                                       outerKey: SecretBytes) throws -> Unwrapped {
        guard let wrapped = record.recoveryWrapped else { throw ProtectionError(.notFound, "no recovery key is set") }
        let inner: SecretBytes
        do {
            inner = try XChaCha20Poly1305.unwrap(wrapped, additionalData: record.recoveryAssociatedData(), key: outerKey)
        } catch let error as SodiumError where error.code == .authenticationFailed {
            throw ProtectionError(.keyBagCorrupt, "the key bag's recovery wrapping does not authenticate under the device secret")
        }
        defer { inner.wipe() }
        let innerKey = try KeyedBlake2b.deriveKey(key: recoveryKey, parts: [Label.recovery])
        defer { innerKey.wipe() }
        let size = KeyBagRecord.wrappedKeyByteCount
        return try inner.withUnsafeBytes { bytes in
            func open(_ index: Int, _ protection: ProtectionClass) throws -> SecretBytes {
                try XChaCha20Poly1305.unwrap(Array(bytes[(index * size)..<((index + 1) * size)]),
                                             additionalData: record.recoveryAssociatedData(for: protection), key: innerKey)
            }
            let a = try open(0, .complete)
            let b = try open(1, .completeUnlessOpen)
            let c = try open(2, .completeUntilFirstUserAuthentication)
            return Unwrapped(current: PasscodeKeys(a: a, bPrivate: b, c: c), previous: nil)
        }
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
        if let recovery = record.recoveryWrapped {
            let inner = try XChaCha20Poly1305.unwrap(recovery, additionalData: record.recoveryAssociatedData(),
                                                     key: deviceKeys.recoveryOuter)
            defer { inner.wipe() }
            updated.recoveryWrapped = try XChaCha20Poly1305.wrap(inner, additionalData: updated.recoveryAssociatedData(),
                                                                 key: newKeys.recoveryOuter)
        }
        try wrapClassD(into: &updated, key: newKeys.classD)
        // The login attempts go first, beside the current file: whichever
        // secret the key bag ends up under, its counts are on disk.
        let movesLoginAttempts = !loginAttempts.records.isEmpty
        if movesLoginAttempts {
            let macKey = try LoginAttempts.macKey(deviceSecret: newSecret)
            defer { macKey.wipe() }
            try AtomicFileWriter(scratchDirectory: Posix.parentDirectory(of: path))
                .write(try loginAttempts.encode(macKey: macKey), to: nextLoginAttemptsPath, durable: true)
        }
        let before = written
        do {
            try persist(updated, macKey: newKeys.recordMAC)
        } catch {
            if written == before { try? Posix.unlink(nextLoginAttemptsPath) }
            throw error
        }
        record = updated
        if movesLoginAttempts { try? Posix.rename(nextLoginAttemptsPath, loginAttemptsPath) }
        deviceSecret = newSecret
        deviceKeys = newKeys
    }

    /// Wipes the class A key and class B private key (a completed lock).
    public func evictForLock() {
        keys.evictForLock()
    }

    /// Wipes the class C key (a return to `beforeFirstUnlock`).
    public func evictClassC() {
        keys.evictClassC()
    }

    /// Crypto-shredding: replaces every class key with new ones (no
    /// passcode), persists that, and wipes the old keys. Files made under
    /// the old keys can never be read again.
    public func erase() throws {
        let (freshRecord, freshKeys) = try Self.fresh(cost: cost, deviceKeys: deviceKeys)
        try persist(freshRecord)
        try? persistLoginAttempts(LoginAttempts())
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

    /// Checks `passcode` as an attempt (`attempt(checking:)`): unwraps A,
    /// B-private and C (and the previous keys) under the passcode key.
    /// Writes a version 1 key bag as version 2 on success.
    private func verify(_ passcode: SecretBytes, countedAgainst counter: AttemptCounter = .machine) throws -> Unwrapped {
        var passcodeKey: SecretBytes?
        defer { passcodeKey?.wipe() }
        return try attempt(checking: "passcode", countedAgainst: counter, { record in
            do {
                passcodeKey = try derivePasscodeKey(passcode, salt: record.salt, cost: record.cost)
            } catch {
                throw NotChecked(reason: "\(error)")
            }
            return try Self.unwrap(record, key: passcodeKey!)
        }, onSuccess: { success, unwrapped in
            guard success.version != KeyBagRecord.currentVersion, let passcodeKey else { return }
            success.version = KeyBagRecord.currentVersion
            try Self.wrap(unwrapped.current, under: passcodeKey, into: &success)
            try wrapClassD(into: &success, key: deviceKeys.classD)
        })
    }

    /// A credential check that could not run (Argon2id out of memory).
    private struct NotChecked: Error {
        let reason: String
    }

    /// One counted attempt at `what` (the passcode, a recovery key):
    /// rate-limits by `counter`'s record, checks the key bag is the one
    /// protd wrote, records the attempt on disk, then runs `unwrap` on the
    /// record. An unwrap that fails authentication is a failed attempt
    /// (`failAttempt`); one that throws `NotChecked` or another libsodium
    /// error (no guarded memory) takes the attempt back. On success it checks the class B public key, lets
    /// `onSuccess` amend the record and writes the count back to 0.
    private func attempt(
        checking what: String, countedAgainst counter: AttemptCounter = .machine,
        _ unwrap: (KeyBagRecord) throws -> Unwrapped,
        onSuccess: (inout KeyBagRecord, Unwrapped) throws -> Void = { _, _ in }
    ) throws -> Unwrapped {
        let now = clock.secondsSinceEpoch()
        let before = attemptRecord(of: counter)
        let wait = policy.secondsUntilNextAttempt(failures: Int(before.failures), lastAttemptAt: before.lastAttemptAt,
                                                  now: now)
        guard wait == 0 else {
            // A clock set back past the last attempt: the whole wait runs
            // from now (recorded, so it ends), not until the clock reaches
            // the recorded time again, which could be hours away.
            if now < before.lastAttemptAt, (try? checkUnchangedOnDisk()) != nil {
                try? store(AttemptRecord(failures: before.failures, lastAttemptAt: now), for: counter)
            }
            throw ProtectionError(.rateLimited, "\(before.failures) consecutive failed attempts\(counter.whose)",
                                  retryAfterSeconds: wait)
        }
        try checkUnchangedOnDisk()
        do {
            try store(AttemptRecord(failures: before.failures + 1, lastAttemptAt: now), for: counter)
        } catch let error as ProtectionError {
            // A full disk: unrecorded attempts must not be checked (they
            // would not count against the limit).
            throw ProtectionError(error.code, "the attempt could not be recorded, so the \(what) was not checked "
                                  + "and the attempt was not counted: \(error.message)")
        }

        let unwrapped: Unwrapped
        do {
            unwrapped = try unwrap(record)
        } catch let error as SodiumError where error.code == .authenticationFailed {
            try failAttempt(what, countedAgainst: counter)
        } catch {
            // The check could not run (Argon2id out of memory, or no
            // guarded memory for the keys), so the attempt is taken back.
            // If that write fails too, it stays counted, as after a crash.
            let reason = (error as? NotChecked)?.reason ?? (error as? SodiumError)?.message
            guard let reason else { throw error }
            try? store(before, for: counter)
            throw ProtectionError(.ioFailure, "the \(what) could not be checked, so the attempt was not counted: \(reason)")
        }
        var success = record
        if counter == .machine { success.failedAttempts = 0 }
        do {
            guard try X25519KeyPair(privateKey: unwrapped.current.bPrivate).publicKey == record.classBPublicKey else {
                throw ProtectionError(.keyBagCorrupt, "the key bag's class B public key is not the one of its private key: "
                                      + "someone holding the device secret replaced it, so class B files created "
                                      + "since may be readable by them")
            }
            try onSuccess(&success, unwrapped)
            // A login attempt's count is in its own file: the key bag changes only on an upgrade.
            if success != record { try persist(success) }
        } catch {
            unwrapped.current.wipe()
            unwrapped.previous?.wipe()
            throw error
        }
        record = success
        if counter != .machine { try? store(AttemptRecord(failures: 0, lastAttemptAt: now), for: counter) }
        return unwrapped
    }

    /// The failed-attempt record `counter` names.
    private func attemptRecord(of counter: AttemptCounter) -> AttemptRecord {
        switch counter {
        case .machine: AttemptRecord(failures: record.failedAttempts, lastAttemptAt: record.lastAttemptAt)
        case .login(let uid): loginAttempts.records[uid] ?? AttemptRecord(failures: 0, lastAttemptAt: 0)
        }
    }

    /// Writes `value` as `counter`'s record, durably.
    private func store(_ value: AttemptRecord, for counter: AttemptCounter) throws {
        switch counter {
        case .machine:
            var updated = record
            updated.failedAttempts = value.failures
            updated.lastAttemptAt = value.lastAttemptAt
            try persist(updated)
            record = updated
        case .login(let uid):
            var updated = loginAttempts
            updated.records[uid] = value.failures == 0 ? nil : value
            guard updated.records.count <= LoginAttempts.maximumEntries else {
                throw ProtectionError(.rateLimited, "too many login users have failed attempts pending")
            }
            try persistLoginAttempts(updated)
        }
    }

    private func persistLoginAttempts(_ updated: LoginAttempts, deviceSecret secret: SecretBytes? = nil) throws {
        if updated.records.isEmpty {
            if Posix.exists(loginAttemptsPath) { try Posix.unlink(loginAttemptsPath) }
        } else {
            let macKey = try LoginAttempts.macKey(deviceSecret: secret ?? deviceSecret)
            defer { macKey.wipe() }
            try AtomicFileWriter(scratchDirectory: Posix.parentDirectory(of: path))
                .write(try updated.encode(macKey: macKey), to: loginAttemptsPath, durable: true)
        }
        loginAttempts = updated
    }

    /// Throws `keyBagCorrupt` when the key bag on disk is not the one
    /// protd last wrote: someone holding the device secret rewrote it
    /// (reset its failed-attempt count, say) while protd ran. A restart
    /// reads whatever is on disk: only storage the device secret cannot
    /// rewrite (a TPM counter) could tell then (docs/SECURITY.md).
    private func checkUnchangedOnDisk() throws {
        let onDisk: [UInt8]
        do {
            onDisk = try Posix.readFile(path)
        } catch let error as ProtectionError where error.code != .notFound {
            // Not being able to look (out of descriptors, say) is no sign of tampering.
            throw ProtectionError(.ioFailure, "the key bag could not be read, so the attempt was not counted: "
                                  + error.message)
        } catch {
            onDisk = []
        }
        guard onDisk == written else {
            throw ProtectionError(.keyBagCorrupt, "the key bag on disk is not the one protd wrote: it was replaced or "
                                  + "rewritten while protd ran (its failed-attempt record reset, say)")
        }
    }

    /// After a wrong passcode or recovery key: erase when the policy says so, else report
    /// the count and the wait.
    private func failAttempt(_ what: String, countedAgainst counter: AttemptCounter) throws -> Never {
        let failures = Int(attemptRecord(of: counter).failures)
        if counter == .machine, let limit = policy.eraseAfter, failures >= limit {
            try erase()
            throw ProtectionError(.erasedAfterFailedAttempts,
                                  "wrong \(what); \(limit) consecutive failures: every key was erased as configured")
        }
        let wait = policy.delay(afterFailures: failures)
        // The wait travels as retryAfterSeconds; clients say it in their own words.
        // The passcode is what a wrong-passcode error is about unless said otherwise.
        let which = what == "passcode" ? "" : "wrong \(what): "
        throw ProtectionError(.wrongPasscode, "\(which)\(failures) consecutive failed attempts\(counter.whose)",
                              retryAfterSeconds: wait > 0 ? wait : nil)
    }

    private func derivePasscodeKey(_ passcode: SecretBytes, salt: [UInt8], cost: Argon2id.Cost) throws -> SecretBytes {
        let stretched = try Argon2id.deriveKey(passcode: passcode, salt: salt, cost: cost)
        defer { stretched.wipe() }
        return try KeyedBlake2b.deriveKey(key: deviceSecret, label: Label.passcode, secret: stretched)
    }

    /// Writes `updated` (or the record) atomically. When only the
    /// directory's fsync failed, after the rename, the new bytes are in
    /// place: the record in memory becomes them too (so a later write does
    /// not put the old one back, and the passcode in use is the one on
    /// disk), and the error says the change is in effect.
    private func persist(_ updated: KeyBagRecord? = nil, macKey: SecretBytes? = nil) throws {
        let bytes = try (updated ?? record).encode(macKey: macKey ?? deviceKeys.recordMAC)
        do {
            try AtomicFileWriter(scratchDirectory: Posix.parentDirectory(of: path)).write(bytes, to: path, durable: true)
        } catch {
            guard (try? Posix.readFile(path)) == bytes else { throw error }
            written = bytes
            // A device secret change keeps its own record of what it did (DeviceSecretMigration).
            if macKey == nil, let updated { record = updated }
            throw ProtectionError(.ioFailure, "the key bag was replaced and the change is in effect, but its directory "
                                  + "could not be synced, so a crash may undo it: \(error)")
        }
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
        // A new key bag has no file beside it (`KeyBagFileCheck`): every
        // file it will see is bound, under a sealed name.
        record.filesBound = true
        record.namesSealed = true
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
