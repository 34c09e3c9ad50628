internal import Glibc
public import Sodium

/// The protection model in one object: key bag, lock state machine, file
/// store and open handles, enforcing the four classes (docs/DESIGN.md).
/// The daemon wraps it with sockets, timers and event delivery.
///
/// Thread-safe. Key state changes are serialised by one lock; file content
/// I/O runs outside it, on per-handle locks.
public final class ProtectedStore: Sendable {
    private struct State {
        var keyBag: KeyBag
        var machine: LockStateMachine
        /// Files with at least one user, by inode.
        var openFiles = OpenFileTable()
        /// Which file each open handle is on.
        var handleFiles: [UInt64: FileIdentity] = [:]
        var nextHandleID: UInt64 = 1
        /// See `takeUndeliveredEvents()`.
        var undeliveredEvents: [ProtectionEvent] = []
        /// Whole-file writes in progress, invalidated with their class.
        var pendingWrites: [ObjectIdentifier: WeakPendingWrite] = [:]
        /// A device secret change that waits for the passcode.
        var deviceSecretMigration: DeviceSecretMigration?
        /// Operations wrapping file keys (creates, whole-file writes, class
        /// changes) in progress, by the key generation they took their keys
        /// from; the first passcode starts a new generation (`HeaderRewrap`).
        var keyUsers = KeyUsers()
        /// Why the key bag can no longer be trusted, once an unlock found it
        /// altered; no key is used after that (`currentKeys()`).
        var fault: String?

        /// Throws `keyBagCorrupt` once the key bag was found altered.
        func refuseIfFaulted() throws {
            if let fault { throw ProtectionError(.keyBagCorrupt, fault) }
        }
    }

    private struct WeakPendingWrite {
        weak var write: PendingWrite?
    }

    private let state: LockedState<State>
    private let files: FileStore
    /// Segment size and cipher of new files.
    private var format: ContentFormat {
        ContentFormat(segmentSize: configuration.segmentSize, cipher: configuration.cipher)
    }
    private let configuration: StoreConfiguration
    private let directoryLock: StateDirectoryLock
    private let notify: @Sendable (StoreNotice) -> Void
    /// Storage quotas per namespace (`NamespaceQuota`).
    private let quota: NamespaceQuota

    /// Opens the state directory, creating the device secret and key bag on
    /// first use. The store starts in `beforeFirstUnlock` when a passcode
    /// is set (as after a reboot), otherwise `unlocked`. A key bag under
    /// `configuration.formerDeviceSecret` is moved to the configured one
    /// (`DeviceSecretMigration`); `notify` hears what was done, to log it.
    public init(configuration: StoreConfiguration, clock: any WallClock = SystemWallClock(),
                notify: @escaping @Sendable (StoreNotice) -> Void = { _ in }) throws {
        guard SegmentLayout.allowedSegmentSizes.contains(configuration.segmentSize) else {
            throw ProtectionError(.invalidArgument, "segment size must be within \(SegmentLayout.allowedSegmentSizes) bytes")
        }
        guard configuration.cipher.isAvailable else {
            throw ProtectionError.cipherUnavailable(configuration.cipher, for: "new files' cipher",
                                                    "choose xchacha20-poly1305 or auto")
        }
        try Posix.makeDirectories(configuration.stateDirectory)
        try StateDirectoryCheck.verify(configuration.stateDirectory)
        directoryLock = try StateDirectoryLock(directory: configuration.stateDirectory)
        // Nothing of this store runs yet, and no other store may (the lock):
        // whatever temporary file is there was left by a write that a crash
        // or kill interrupted.
        try Self.removeStateTemporaryFiles(configuration)
        let storeRoot = configuration.stateDirectory + "/store"
        try KeyBagFileCheck.verify(keyBag: configuration.stateDirectory + "/keybag", store: storeRoot, notify: notify)
        let (keyBag, migration) = try DeviceSecretMigration.openKeyBag(
            target: configuration.deviceSecret, former: configuration.formerDeviceSecret, notify: notify
        ) { deviceSecret in
            try ProtectionError.translating {
                try KeyBag(path: configuration.stateDirectory + "/keybag", deviceSecret: deviceSecret,
                           cost: configuration.passcodeCost, policy: configuration.failedAttemptPolicy, clock: clock)
            }
        }
        let files = FileStore(root: storeRoot, names: try StoreNames(classD: keyBag.keys.d))
        let machine = LockStateMachine(passcodeSet: keyBag.hasPasscode,
                                       firstUnlockTimeout: configuration.firstUnlockTimeout)
        state = LockedState(State(keyBag: keyBag, machine: machine, deviceSecretMigration: migration))
        self.notify = notify
        self.files = files
        self.configuration = configuration
        let openFiles = state.withLock { $0.openFiles.index }
        quota = NamespaceQuota(configuration.quota) { [files, openFiles] namespace in
            NamespaceQuota.amount(of: try files.list(in: namespace, prefix: "", openFile: Self.openFileAttributes(in: openFiles)))
        }
        let interrupted = try files.removeLeftoverTemporaryFiles()
        if interrupted > 0 { notify(.removedInterruptedWrites(interrupted)) }
        let legacy = try LegacyLayoutMigration.run(files)
        if legacy.moved > 0 || legacy.leftBehind > 0 {
            notify(.namesSealed(moved: legacy.moved, leftBehind: legacy.leftBehind, in: legacy.leftBehindIn))
        }
        try state.withLock { state in try ProtectionError.translating { try state.keyBag.markNamesSealed() } }
        // Files of an older protd are bound to their names with the keys in memory now.
        completeHeaderRewraps()
    }

    /// Removes the temporary files of interrupted key bag and device
    /// secret writes in the state directory (`tmp-<32 hex>`,
    /// `device-key.tmp-<32 hex>`): a key bag one keeps wrapped class keys
    /// that an erase replaced. Only while no key bag write can run: at
    /// start, or under the state lock.
    private static func removeStateTemporaryFiles(_ configuration: StoreConfiguration) throws {
        try AtomicFileWriter(scratchDirectory: configuration.stateDirectory).removeLeftovers()
        try DeviceSecret.removeLeftoverTemporaryFiles(for: configuration.deviceSecret)
    }

    // MARK: - Lock state

    /// The current lock state.
    public var lockState: LockState { state.withLock { $0.machine.state } }

    /// Lock state, passcode and failed-attempt record.
    public var status: StoreStatus {
        state.withLock { state in
            StoreStatus(state: state.machine.state, passcodeSet: state.keyBag.hasPasscode,
                        failedAttempts: state.keyBag.failedAttempts, recoveryKeySet: state.keyBag.hasRecoveryKey,
                        secondsUntilNextAttempt: state.keyBag.secondsUntilNextAttempt,
                        lockDeadline: state.machine.deadline, eventSequence: state.machine.sequence,
                        fault: state.fault, firstUnlockTimeout: configuration.firstUnlockTimeout,
                        firstUnlockDeadline: state.machine.firstUnlockDeadline)
        }
    }

    /// Unlocks with `passcode` (rate-limited, counted on disk first) at
    /// `now` on the boot clock, where the first-unlock timeout starts again.
    /// Returns the events to deliver (`didBecomeAvailable`). When the
    /// failure erased everything (erase-after-N), the erase is completed
    /// and its event waits in `takeUndeliveredEvents()`.
    /// An unlock that finds a key rotation pending (a crash interrupted the
    /// one the first passcode started) finishes it before returning.
    /// `counter`: whose failed-attempt count it goes to (`.login` for an
    /// unlock at login, docs/pam.md).
    public func unlock(passcode: SecretBytes, countedAgainst counter: AttemptCounter = .machine,
                       now: BootInstant = .now) throws -> [ProtectionEvent] {
        let events = try completingErase { state in
            try checkingKeyBag(in: &state) { try $0.unlock(passcode: passcode, countedAgainst: counter) }
            completeDeviceSecretMigration(in: &state, passcode: passcode)
            return perform(state.machine.unlockSucceeded(now: now), on: &state).events
        }
        completeHeaderRewraps()
        return events
    }

    /// Sets the first passcode, or changes it given the current one. A
    /// change rewrites only the key bag. The first passcode replaces the
    /// A, B and C keys, which the device secret alone could reach, and
    /// rewraps every file's key under the new ones before returning
    /// (`HeaderRewrap`). The lock state does not change; the first-unlock
    /// timeout starts again at `now`. A wrong old passcode counts as a
    /// failed attempt, erase-after-N included.
    public func setPasscode(_ new: SecretBytes, old: SecretBytes?, now: BootInstant = .now) throws {
        try completingErase { state in
            let first = !state.keyBag.hasPasscode
            try checkingKeyBag(in: &state) { try $0.setPasscode(new, old: old) }
            if first { state.keyUsers.startGeneration() }
            completeDeviceSecretMigration(in: &state, passcode: new)
            state.machine.passcodeGiven(now: now)
        }
        completeHeaderRewraps()
    }

    /// Makes a recovery key (`KeyBag.createRecovery`) after checking
    /// `passcode` as an attempt; returned once, stored nowhere.
    public func createRecoveryKey(passcode: SecretBytes) throws -> SecretBytes {
        // A rotation the first passcode left unfinished must end first.
        completeHeaderRewraps()
        var recoveryKey: SecretBytes?
        try completingErase { state in
            try checkingKeyBag(in: &state) { recoveryKey = try $0.createRecovery(passcode: passcode) }
        }
        return recoveryKey!
    }

    /// Deletes the recovery wrapping; the recovery key opens nothing after.
    /// Refused (`keyBagCorrupt`) once the key bag was found altered, like
    /// every other key bag write.
    public func removeRecoveryKey() throws {
        try state.withLock { state in
            try state.refuseIfFaulted()
            try ProtectionError.translating { try state.keyBag.removeRecovery() }
        }
    }

    /// Sets `new` as the passcode with the recovery key (counted as an
    /// attempt, like an unlock) and unlocks at `now` on the boot clock;
    /// returns the events to deliver.
    public func resetPasscode(recoveryKey: SecretBytes, new: SecretBytes, now: BootInstant = .now) throws
        -> [ProtectionEvent] {
        try completingErase { state in
            try checkingKeyBag(in: &state) { try $0.resetPasscode(recoveryKey: recoveryKey, new: new) }
            completeDeviceSecretMigration(in: &state, passcode: new)
            return perform(state.machine.unlockSucceeded(now: now), on: &state).events
        }
    }

    /// Runs a key bag call that checks the passcode; when it finds the key
    /// bag altered (`keyBagCorrupt`), the store stops using keys and
    /// `status` reports why, until a restart.
    private func checkingKeyBag(in state: inout State, _ body: (KeyBag) throws -> Void) throws {
        try state.refuseIfFaulted()
        let keyBag = state.keyBag
        do {
            try ProtectionError.translating { try body(keyBag) }
        } catch let error as ProtectionError where error.code == .keyBagCorrupt {
            state.fault = error.message
            invalidateHandles(in: &state) { _ in true }
            throw error
        }
    }

    /// Runs `HeaderRewrap` for what is pending: after the first passcode,
    /// every class A, B and C file moves to the new class keys, then the
    /// previous keys are dropped, unless a file could not be rewrapped or
    /// an operation that took them is still running; and version 1 headers
    /// are bound to their names and owners, after which version 1 is
    /// refused. What is left waits for the next unlock.
    private func completeHeaderRewraps() {
        // An operation that took the old keys and was still running when
        // the walk began may name its file behind the walk, even if it has
        // ended by the time the walk does: only a walk that began with none
        // running may drop the previous keys.
        let (rotation, binding, oldKeysInUse) = state.withLock {
            ($0.keyBag.rotationPending, !$0.keyBag.filesBound, $0.keyUsers.olderGenerationInUse)
        }
        guard rotation || binding else { return }
        let outcome = HeaderRewrap(files: files) { name, namespace in
            let keys = try self.currentKeys()
            let flush = try self.withOpenFile(name, in: namespace) { file -> FileFlush? in
                guard file.header.version == 1 || (rotation && file.header.protection != .none) else { return nil }
                return try file.changeProtection(to: file.header.protection, keys: keys)
            }
            try flush?.run()
            return flush != nil
        }.run()
        let notice = state.withLock { state -> StoreNotice? in
            var finished = outcome.unfinished.isEmpty
            do {
                if finished && state.keyBag.rotationPending {
                    if oldKeysInUse || state.keyUsers.olderGenerationInUse {
                        finished = false
                    } else {
                        try state.keyBag.finishRotation()
                    }
                }
                if outcome.unfinished.isEmpty { try state.keyBag.markFilesBound() }
                // A version 1 key bag became version 2 at this unlock: it can
                // now record the sealed names the start moved its files to.
                try state.keyBag.markNamesSealed()
            } catch {
                return .failed("rewriting file headers: \(error)")
            }
            let quiet = outcome.rewrapped == 0 && outcome.damaged.isEmpty && finished
            return quiet ? nil : outcome.notice(finished: finished)
        }
        if let notice { notify(notice) }
    }


    /// Finishes a pending device secret change now that `passcode` was
    /// verified; a failure is reported and leaves it pending.
    private func completeDeviceSecretMigration(in state: inout State, passcode: SecretBytes?) {
        guard let migration = state.deviceSecretMigration,
              migration.complete(state.keyBag, passcode: passcode, notify: notify) else { return }
        state.deviceSecretMigration = nil
    }

    /// Events produced by an operation that then failed (an erase after
    /// too many wrong passcodes); the caller delivers them.
    public func takeUndeliveredEvents() -> [ProtectionEvent] {
        state.withLock { state in
            defer { state.undeliveredEvents.removeAll() }
            return state.undeliveredEvents
        }
    }

    /// Starts a lock: class A and class B private keys go away when every
    /// subscriber in `subscribers` acknowledged or `grace` has passed. Throws
    /// `noPasscodeSet` when there is no passcode to unlock with afterwards.
    public func requestLock(
        grace: Duration, now: ContinuousClock.Instant = .now, subscribers: Set<SubscriberID> = [],
        reason: LockReason = .requested
    ) throws -> LockProgress {
        try state.withLock { state in
            guard state.keyBag.hasPasscode else {
                throw ProtectionError(.noPasscodeSet, "cannot lock without a passcode; set one with passwd first")
            }
            switch state.machine.lockRequested(grace: grace, now: now, subscribers: subscribers, reason: reason) {
            case .alreadyUnavailable:
                return LockProgress(events: [], pendingDeadline: state.machine.deadline)
            case .accepted(let actions):
                return perform(actions, on: &state)
            }
        }
    }

    /// Starts the return to `beforeFirstUnlock` (`LockStateMachine`): class
    /// A, B private and C keys go after `grace` or every acknowledgement.
    /// Nothing happens with no passcode or in `beforeFirstUnlock`.
    public func returnToBeforeFirstUnlock(
        reason: LockReason, grace: Duration, now: ContinuousClock.Instant = .now, subscribers: Set<SubscriberID> = []
    ) -> LockProgress {
        state.withLock {
            perform($0.machine.returnToBeforeFirstUnlock(reason: reason, grace: grace, now: now, subscribers: subscribers),
                    on: &$0)
        }
    }

    /// Starts the return to `beforeFirstUnlock` (reason `inactivity`, with
    /// `grace`) once the first-unlock timeout has passed at `bootNow`.
    public func firstUnlockTimeoutPassed(
        at bootNow: BootInstant = .now, grace: Duration, now: ContinuousClock.Instant = .now,
        subscribers: Set<SubscriberID> = []
    ) -> LockProgress {
        state.withLock {
            perform($0.machine.firstUnlockTimeoutPassed(now: bootNow, grace: grace, lockNow: now, subscribers: subscribers),
                    on: &$0)
        }
    }

    /// `subscriber` acknowledged the `willBecomeUnavailable` with
    /// `sequence`; only the current lock's latest one counts.
    public func acknowledge(_ subscriber: SubscriberID, sequence: UInt64) -> LockProgress {
        state.withLock { perform($0.machine.acknowledged(by: subscriber, sequence: sequence), on: &$0) }
    }

    /// Takes an acknowledgement that cannot complete the lock, which needs
    /// nothing more than this call: returns true once it is taken or
    /// ignored, false (changing nothing) when it is the last one awaited,
    /// which `acknowledge` must take.
    public func acknowledgeUnlessLast(_ subscriber: SubscriberID, sequence: UInt64) -> Bool {
        state.withLock { $0.machine.acknowledgedWithoutCompleting(by: subscriber, sequence: sequence) }
    }

    /// `subscriber` went away; it no longer holds up a lock.
    public func subscriberLeft(_ subscriber: SubscriberID) -> LockProgress {
        state.withLock { perform($0.machine.subscriberLeft(subscriber), on: &$0) }
    }

    /// Completes a lock whose grace period has ended by `now`.
    public func deadlinePassed(now: ContinuousClock.Instant = .now) -> LockProgress {
        state.withLock { perform($0.machine.deadlinePassed(now: now), on: &$0) }
    }

    /// Runs a passcode check; if it erased the key bag (erase-after-N),
    /// finishes the erase: handles invalidated, state unlocked with no
    /// passcode, files removed.
    private func completingErase<R>(_ body: (inout State) throws -> R) throws -> R {
        var erased = false
        defer { if erased { try? files.removeEverything(); quota.forgetAll() } }
        return try state.withLock { state in
            do {
                return try body(&state)
            } catch let error as ProtectionError where error.code == .erasedAfterFailedAttempts {
                erased = true
                do {
                    files.useNames(try ProtectionError.translating { try StoreNames(classD: state.keyBag.keys.d) })
                } catch {
                    // New files would be named under the erased keys.
                    state.fault = "the erase could not derive the new name keys: \(error)"
                }
                invalidateHandles(in: &state) { _ in true }
                state.undeliveredEvents += perform(state.machine.erased(), on: &state).events
                try? Self.removeStateTemporaryFiles(configuration)
                throw error
            }
        }
    }

    /// Crypto-shredding: new class keys (no passcode), every handle
    /// invalidated, every file removed, and the temporary files of
    /// interrupted key bag writes too. Irreversible. Returns the events to
    /// deliver (data is available again, with no passcode). When removing
    /// files fails after the keys were replaced, the erase happened all
    /// the same: its events wait in `takeUndeliveredEvents()`.
    public func erase() throws -> [ProtectionEvent] {
        defer { quota.forgetAll() }
        var cleanupError: (any Error)?
        let events = try state.withLock { state in
            invalidateHandles(in: &state) { _ in true }
            try ProtectionError.translating { try state.keyBag.erase() }
            files.useNames(try ProtectionError.translating { try StoreNames(classD: state.keyBag.keys.d) })
            completeDeviceSecretMigration(in: &state, passcode: nil)
            let events = perform(state.machine.erased(), on: &state).events
            // Under the lock, so no key bag write is in progress.
            do { try Self.removeStateTemporaryFiles(configuration) } catch { cleanupError = error }
            return events
        }
        do {
            try files.removeEverything()
            if let cleanupError { throw cleanupError }
        } catch {
            state.withLock { $0.undeliveredEvents += events }
            throw error
        }
        return events
    }

    /// Closes every handle and wipes every key; the store is unusable after,
    /// and another store may open its directory.
    public func shutdown() {
        state.withLock { state in
            invalidateHandles(in: &state) { _ in true }
            state.keyBag.wipe()
        }
        directoryLock.release()
    }

    // MARK: - Files

    /// Writes `data` as the whole content of `name` in class `protection`,
    /// atomically: readers and crashes see the old or the new content (the
    /// data is fsynced before the rename). With `durable`, the rename is
    /// fsynced too before returning.
    public func write(
        _ data: [UInt8], to name: FileName, in namespace: Namespace,
        protection: ProtectionClass = .default, durable: Bool = true
    ) throws {
        let pending = try beginWrite(to: name, in: namespace, protection: protection, durable: durable)
        try pending.append(data)
        try pending.commit()
    }

    /// Starts a streamed whole-file write: append the content in pieces,
    /// then commit. Creating needs only the key that wraps the new file's
    /// key, so class B works while locked.
    public func beginWrite(
        to name: FileName, in namespace: Namespace, protection: ProtectionClass = .default, durable: Bool = true
    ) throws -> PendingWrite {
        let (keys, keyUse) = try keysForWrapping()
        let path = try name.speaking(existing: false) { try files.pathCreatingParents(for: name, in: namespace) }
        // Quota (NamespaceQuota): a new file counts now, its bytes as they come.
        let quotaCharge = quota.charge(replacing: path, in: namespace, size: plaintextSize(of: name, at: path, in: namespace))
        try quotaCharge?.grow(toSize: 0)
        let transaction = try files.atomicWriter(for: namespace).begin(target: path)
        let writer = try ProtectionError.translating {
            try SegmentStreamWriter(fd: transaction.fd, path: transaction.temporaryPath, protection: protection,
                                    format: format, binding: FileBinding(name, in: namespace), keys: keys)
        }
        let pending = PendingWrite(name: name, protection: protection, transaction: transaction, writer: writer,
                                   durable: durable)
        pending.quotaCharge = quotaCharge
        pending.keyUse = keyUse
        pending.published = { [files] in files.restoreSidecar(of: name, at: path, in: namespace) }
        let registered = state.withLock { state in
            // A class A or C write may not start after its key is gone.
            if Self.classKeyGone(protection, in: state) { return false }
            state.pendingWrites = state.pendingWrites.filter { $0.value.write != nil }
            state.pendingWrites[ObjectIdentifier(pending)] = WeakPendingWrite(write: pending)
            return true
        }
        guard registered else {
            // Outside the state lock: letting go of its keys takes that lock.
            pending.abort()
            throw ProtectionError.unavailable(protection)
        }
        return pending
    }

    /// The whole content of `name`.
    public func read(_ name: FileName, in namespace: Namespace) throws -> [UInt8] {
        try read(name, in: namespace, offset: 0, count: Int.max)
    }

    /// Up to `count` bytes of `name` from `offset`.
    public func read(_ name: FileName, in namespace: Namespace, offset: Int, count: Int) throws -> [UInt8] {
        guard offset >= 0, count >= 0 else { throw ProtectionError(.invalidArgument, "offset and length must not be negative") }
        let small = try readSmallFile(name, in: namespace, offset: offset, count: count,
                                      ifAtMost: Self.smallFileLimit) { count, fill in
            try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                try fill(UnsafeMutableRawBufferPointer(buffer))
                initialized = count
            }
        }
        if let small { return small }
        return try withOpenFile(name, in: namespace) { try $0.read(offset: offset, count: count) }
    }

    /// Files up to this size are read by `read` in one go (`readSmallFile`).
    public static let smallFileLimit = 512 * 1024

    /// Bytes `offset..<offset+count` (clipped to the file) of `name`, in one
    /// go, when the whole file holds at most `limit` bytes and no handle
    /// has it open; else nil, and the caller opens it (`open`). `deliver`
    /// gets the byte count and a function that decrypts those bytes into
    /// a buffer of that size; it does all the file's key work in one key
    /// window (`EncryptedFile.readWhole`), so a small file's read changes
    /// page protection once. Serialised with the file's handles like every
    /// one-off call.
    public func readSmallFile<R>(
        _ name: FileName, in namespace: Namespace, offset: Int, count: Int, ifAtMost limit: Int,
        _ deliver: (_ count: Int, _ fill: (UnsafeMutableRawBufferPointer) throws -> Void) throws -> R
    ) throws -> R? {
        guard offset >= 0, count >= 0 else { throw ProtectionError(.invalidArgument, "offset and length must not be negative") }
        let path = try files.path(for: name, in: namespace)
        return try name.speaking {
            let fd = try Posix.open(path, O_RDONLY | O_NOFOLLOW)
            defer { close(fd) }
            let identity = try ProtectionError.translating { try FileIdentity(fd: fd, path: path) }
            let keys = try currentKeys()
            let shared = joinSharedFile(identity)
            defer { leaveSharedFile(shared) }
            let range = offset..<(offset + min(count, Int.max - offset))
            return try shared.whileUnopened {
                try EncryptedFile.readWhole(fd: fd, path: path, binding: FileBinding(name, in: namespace), keys: keys,
                                            range: range, ifAtMost: limit, deliver)
            } ?? nil
        }
    }

    /// Opens a handle. Opening an existing file needs its class key to
    /// unwrap the file key, even when another handle has it open; creating
    /// one needs only the key that wraps (the public key for class B).
    public func open(_ name: FileName, in namespace: Namespace, mode: OpenMode) throws -> ProtectedFileHandle {
        try name.speaking(existing: mode == .existing) { try openUnnamed(name, in: namespace, mode: mode) }
    }

    private func openUnnamed(_ name: FileName, in namespace: Namespace, mode: OpenMode) throws -> ProtectedFileHandle {
        // Only a create makes the name's parent directories: opening an
        // existing file leaves the tree as it is (and costs no mkdir).
        let path = mode == .existing ? try files.path(for: name, in: namespace)
                                     : try files.pathCreatingParents(for: name, in: namespace)
        // Quota (NamespaceQuota): a create holds one more file until the open ends.
        let creation = mode == .existing ? nil : try quota.charge(creating: path, in: namespace)
        defer { creation?.finish(size: Posix.exists(path) ? 0 : nil) }
        switch mode {
        case .existing:
            if let handle = try openExisting(name, at: path, in: namespace) { return handle }
        case .createNew(let protection):
            return try create(name, at: path, in: namespace, protection: protection)
        case .openOrCreate(let protection):
            if let handle = try openExisting(name, at: path, in: namespace) { return handle }
            do {
                return try create(name, at: path, in: namespace, protection: protection)
            } catch let error as ProtectionError where error.code == .alreadyExists {
                // Someone else created it meanwhile: theirs is opened.
                if let handle = try openExisting(name, at: path, in: namespace) { return handle }
            }
        }
        throw ProtectionError(.notFound, "no file named \(name)")
    }

    /// A handle on the existing file `path`; nil when there is none.
    private func openExisting(_ name: FileName, at path: String, in namespace: Namespace) throws -> ProtectedFileHandle? {
        let fd: Int32
        do {
            fd = try Posix.open(path, O_RDWR | O_NOFOLLOW)
        } catch let error as ProtectionError where error.code == .notFound {
            return nil
        }
        let keys = try currentKeys()
        return try handOut(fd, at: path, name: name, in: namespace) {
            try EncryptedFile.open(fd: fd, path: path, binding: FileBinding(name, in: namespace), keys: keys)
        }
    }

    /// Creates `name` atomically: the new file gets its header (and empty
    /// final segment) as a temporary file, fsynced, and only then its name,
    /// which must be free (`alreadyExists`). So nobody, not a reader and
    /// not a restart after a crash, ever sees the name on a file without a
    /// valid header. The name is given under the file's lock, so a file
    /// that a lock or erase invalidated meanwhile never gets it. Creating
    /// needs only the key that wraps (the public key for class B).
    private func create(_ name: FileName, at path: String, in namespace: Namespace,
                        protection: ProtectionClass) throws -> ProtectedFileHandle {
        let (fd, temporary) = try files.atomicWriter(for: namespace).createTemporary()
        defer { unlink(temporary) }
        let (keys, keyUse) = try keysForWrapping()
        defer { keyUse.end() }
        return try handOut(fd, at: path, name: name, in: namespace, naming: temporary) {
            try EncryptedFile.create(fd: fd, path: path, protection: protection, format: format,
                                     binding: FileBinding(name, in: namespace), keys: keys)
        }
    }

    /// Hands out a handle on the file open in `fd` (which it owns from
    /// now on): `open` makes its `EncryptedFile`, serialised with the
    /// inode's other users. A new file is the temporary file `temporary`:
    /// it is fsynced (no lock held), then linked at `path` under the file's
    /// lock, unless a lock or erase invalidated it meanwhile. A new file
    /// that cannot be handed out is removed again, unless its name
    /// meanwhile names another file (a delete, then someone else's create).
    private func handOut(_ fd: Int32, at path: String, name: FileName, in namespace: Namespace,
                         naming temporary: String? = nil,
                         open: () throws -> EncryptedFile) throws -> ProtectedFileHandle {
        var ownsFD = true
        defer { if ownsFD { close(fd) } }
        let identity = try ProtectionError.translating { try FileIdentity(fd: fd, path: path) }
        let shared = joinSharedFile(identity)
        defer { leaveSharedFile(shared) }
        let protection = try shared.join(on: name, creating: temporary != nil, open: {
            let file = try open()
            ownsFD = false
            return file
        }) { $0.header.protection }
        if let temporary {
            try AtomicFileWriter.flushTemporary(temporary)
            try shared.perform(on: name) { _ in try AtomicFileWriter.publish(temporary, as: path) }
            files.restoreSidecar(of: name, at: path, in: namespace)
        }
        do {
            return try register(shared, protection: protection, name: name, namespace: namespace)
        } catch {
            if temporary != nil { identity.unlink(ifStillNamedBy: path) }
            throw error
        }
    }

    /// The class of `name`, from its header; works in every state.
    public func protection(of name: FileName, in namespace: Namespace) throws -> ProtectionClass {
        try attributes(of: name, in: namespace).protection
    }

    /// Moves `name` to class `protection` by rewrapping its file key: the
    /// old class's key must be available to unwrap it, the new class's to
    /// wrap it (for class B the public key suffices). Content is untouched.
    public func setProtection(_ protection: ProtectionClass, of name: FileName, in namespace: Namespace) throws {
        let (keys, keyUse) = try keysForWrapping()
        defer { keyUse.end() }
        let flush = try withOpenFile(name, in: namespace) { try $0.changeProtection(to: protection, keys: keys) }
        try flush.run()
    }

    /// Size, class and modification time of `name`; works in every state.
    /// While handles have the file open, class and size are theirs, read
    /// between their writes.
    public func attributes(of name: FileName, in namespace: Namespace) throws -> FileAttributes {
        try name.speaking { try files.attributes(of: name, in: namespace, openFile: openFileAttributes) }
    }

    /// Files in `namespace` whose name starts with `prefix`; every state.
    public func list(in namespace: Namespace, prefix: String = "") throws -> [FileAttributes] {
        try files.list(in: namespace, prefix: prefix, openFile: openFileAttributes)
    }

    /// Deletes `name`; works in every state.
    public func delete(_ name: FileName, in namespace: Namespace) throws {
        // Quota (NamespaceQuota): the file's bytes and place are given back.
        let path = try files.path(for: name, in: namespace)
        let quotaCharge = quota.charge(replacing: path, in: namespace, size: plaintextSize(of: name, at: path, in: namespace))
        try name.speaking { try files.delete(name, at: path, in: namespace) }
        quotaCharge?.finish(size: nil)
    }

    /// Checks the store on disk, changing nothing (`StoreCheck`): names,
    /// sidecars, headers and lengths, and key slots and tags with the class
    /// keys in memory. Every state; refused once the key bag was found altered.
    public func check() throws -> StoreCheckReport {
        _ = try currentKeys()
        return StoreCheck(files: files, keys: { try? self.currentKeys() }) { identity, body in
            // As a user of the inode's shared file, so no handle is halfway through a write.
            let shared = self.joinSharedFile(identity)
            defer { self.leaveSharedFile(shared) }
            shared.serialised(body)
        }.run()
    }

    /// Handles currently open.
    public var openHandleCount: Int {
        state.withLock { $0.handleFiles.count }
    }

    // MARK: - Internals

    /// Measures the plaintext size of the file `name` at `path` (nil when it
    /// cannot be read), for a quota charge that measures it again later.
    private func plaintextSize(of name: FileName, at path: String, in namespace: Namespace) -> () -> Int? {
        { [weak self] in
            guard let self else { return nil }
            return try? files.attributes(of: name, at: path, in: namespace, openFile: openFileAttributes).size
        }
    }

    /// The keys in memory now; `keyBagCorrupt` once an unlock found the
    /// key bag altered.
    private func currentKeys() throws -> ClassKeys {
        try state.withLock { state in
            try state.refuseIfFaulted()
            return state.keyBag.keys
        }
    }

    /// `currentKeys()` for an operation that wraps a file key with them;
    /// it holds the returned use until its new wrapping has a name.
    private func keysForWrapping() throws -> (ClassKeys, KeyUse) {
        try state.withLock { state in
            try state.refuseIfFaulted()
            let generation = state.keyUsers.begin()
            return (state.keyBag.keys, KeyUse { [weak self] in self?.state.withLock { $0.keyUsers.end(generation) } })
        }
    }

    /// Opens `name` for a one-off operation (which needs its class key)
    /// and runs `body` on it as a user of the inode's `SharedOpenFile`: the
    /// one its handles share, or a new one for the call that handles
    /// opened meanwhile join. So the open, `body` and every handle's write
    /// are serialised (nobody sees a write half done: a segment that lost
    /// its final flag before the new final one was written used to be a
    /// false `integrityFailure`) and everyone sees one size and header.
    private func withOpenFile<R>(_ name: FileName, in namespace: Namespace, _ body: (EncryptedFile) throws -> R) throws -> R {
        let path = try files.path(for: name, in: namespace)
        return try name.speaking {
            let fd = try Posix.open(path, O_RDWR | O_NOFOLLOW)
            var ownsFD = true
            defer { if ownsFD { close(fd) } }
            let identity = try ProtectionError.translating { try FileIdentity(fd: fd, path: path) }
            let keys = try currentKeys()
            let shared = joinSharedFile(identity)
            defer { leaveSharedFile(shared) }
            return try shared.join(on: name, open: {
                let file = try EncryptedFile.open(fd: fd, path: path, binding: FileBinding(name, in: namespace), keys: keys)
                ownsFD = false
                return file
            }, body)
        }
    }

    /// Counts a caller (a one-off call, or a handle until `register`) as
    /// a transient user of the inode's shared file, adding one not yet
    /// open when there is none. End with `leaveSharedFile`.
    private func joinSharedFile(_ identity: FileIdentity) -> SharedOpenFile {
        state.withLock { state in
            if var entry = state.openFiles[identity] {
                entry.transientUsers += 1
                state.openFiles[identity] = entry
                return entry.file
            }
            let shared = SharedOpenFile(identity: identity)
            state.openFiles[identity] = OpenFileEntry(file: shared, handles: [], transientUsers: 1)
            return shared
        }
    }

    /// Ends a transient use of `shared`; closes it when nobody uses it.
    private func leaveSharedFile(_ shared: SharedOpenFile) {
        state.withLock { state in
            // Gone or replaced: it was invalidated (and so closed) meanwhile.
            guard var entry = state.openFiles[shared.identity], entry.file === shared else { return }
            entry.transientUsers -= 1
            if entry.isUnused {
                entry.file.close()
                state.openFiles.removeValue(forKey: shared.identity)
            } else {
                state.openFiles[shared.identity] = entry
            }
        }
    }

    /// Class and size of the inode `identity` as its shared file knows
    /// them after its last finished call, or `nil` when it is not open.
    private func openFileAttributes(_ identity: FileIdentity) -> (protection: ProtectionClass, size: Int)? {
        Self.openFileAttributes(in: state.withLock { $0.openFiles.index })(identity)
    }

    /// `openFileAttributes` from the open files' index, not the state: a
    /// quota measurement runs it inside a file's lock (`OpenFileTable`).
    private static func openFileAttributes(in index: OpenFileTable.Index) -> FileStore.OpenFileAttributes {
        { identity in index.withLock { $0[identity] }?.currentAttributes }
    }

    /// Whether `protection` is A or C and its key is gone: a lock (or a
    /// return to `beforeFirstUnlock`) completed while a handle or write on
    /// such a file was being set up.
    private static func classKeyGone(_ protection: ProtectionClass, in state: State) -> Bool {
        switch protection {
        case .complete: state.keyBag.keys.a == nil
        case .completeUntilFirstUserAuthentication: state.keyBag.keys.c == nil
        case .completeUnlessOpen, .none: false
        }
    }

    /// Adds a handle on `shared`, which the caller opened (finding the
    /// file in class `protection`) and still uses. Done under the state
    /// lock, re-checking that a class A or C key is still present, so no
    /// such handle can slip past a lock that completed while it was being
    /// opened; a lock or erase that invalidated `shared` meanwhile removed
    /// its entry. `shared`'s own lock is not taken here: a long call on the
    /// file must not hold up the store.
    private func register(_ shared: SharedOpenFile, protection: ProtectionClass, name: FileName,
                          namespace: Namespace) throws -> ProtectedFileHandle {
        try state.withLock { state in
            guard var entry = state.openFiles[shared.identity], entry.file === shared else {
                throw ProtectionError.closedWhileOpening(name)
            }
            if Self.classKeyGone(protection, in: state) {
                throw ProtectionError.unavailable(protection)
            }
            let id = state.nextHandleID
            state.nextHandleID += 1
            entry.handles.insert(id)
            state.openFiles[shared.identity] = entry
            state.handleFiles[id] = shared.identity
            return ProtectedFileHandle(id: id, name: name, namespace: namespace, file: shared, quota: quota) { [weak self] id in
                self?.handleClosed(id)
            }
        }
    }

    /// Forgets handle `id`; closes its file when it was the last handle.
    private func handleClosed(_ id: UInt64) {
        state.withLock { state in
            guard let identity = state.handleFiles.removeValue(forKey: id),
                  var entry = state.openFiles[identity] else { return }
            entry.handles.remove(id)
            if entry.isUnused {
                entry.file.close()
                state.openFiles.removeValue(forKey: identity)
            } else {
                state.openFiles[identity] = entry
            }
        }
    }

    /// Invalidates every open file and whole-file write whose class matches.
    private func invalidateHandles(in state: inout State, where shouldInvalidate: (ProtectionClass?) -> Bool) {
        for (key, entry) in state.pendingWrites {
            guard let write = entry.write else {
                state.pendingWrites.removeValue(forKey: key)
                continue
            }
            if shouldInvalidate(write.protection) {
                write.invalidate()
                state.pendingWrites.removeValue(forKey: key)
            }
        }
        for (identity, entry) in state.openFiles where shouldInvalidate(entry.file.protection) {
            entry.file.invalidate()
            state.openFiles.removeValue(forKey: identity)
            for id in entry.handles { state.handleFiles.removeValue(forKey: id) }
        }
    }

    /// Carries out the state machine's actions; returns events and deadline.
    private func perform(_ actions: [LockStateMachine.Action], on state: inout State) -> LockProgress {
        var events: [ProtectionEvent] = []
        var deadline: ContinuousClock.Instant?
        for action in actions {
            switch action {
            case .emit(let event): events.append(event)
            case .scheduleDeadline(let instant): deadline = instant
            case .invalidateClassAHandles: invalidateHandles(in: &state) { $0 == .complete }
            case .invalidateClassCHandles: invalidateHandles(in: &state) { $0 == .completeUntilFirstUserAuthentication }
            case .evictClassKeys: state.keyBag.evictForLock()
            case .evictClassCKey: state.keyBag.evictClassC()
            }
        }
        return LockProgress(events: events, pendingDeadline: deadline ?? state.machine.deadline)
    }
}
