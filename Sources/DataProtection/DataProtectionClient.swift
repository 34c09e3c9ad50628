internal import ProtectionModel
internal import ProtectionWire

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A connection to the protd daemon: files, lock state and events.
///
/// Make one with `connect`, share it between tasks (it is `Sendable` and
/// requests may run concurrently), and `close()` it when done. Every method
/// fails with `DataProtectionError`; once the daemon goes away every pending
/// and later call fails with `.daemonUnavailable` and `events` finishes.
/// Cancelling a task ends its wait with `.cancelled` (a request already sent
/// may still be carried out).
///
/// No call blocks a thread: every wait for the daemon suspends the task,
/// and each one (an answer, or room in the socket for the next chunk of a
/// large write) is bounded by `requestTimeout` (60 seconds unless given to
/// `connect`), after which it fails with `.timedOut`. A daemon that takes no
/// data for that long is treated as stalled and the connection is closed.
/// A waiting `lock(grace:waitUntilLocked:)` adds the grace period to it.
/// Iterating `events` waits for events without a limit: cancel the task to stop.
public final class DataProtectionClient: Sendable {
    /// How long one wait for the daemon may last unless `connect` is told otherwise.
    public static let defaultRequestTimeout = Duration.seconds(60)
    /// Where protd listens unless told otherwise.
    public static let defaultSocketPath = "/run/protd/protd.sock"
    /// The environment variable that overrides `defaultSocketPath`.
    public static let socketPathEnvironmentVariable = "PROTD_SOCKET"

    /// The name this process introduces itself with: its executable's name.
    public static var defaultClientName: String {
        let executable = CommandLine.arguments.first.flatMap { $0.split(separator: "/").last }.map(String.init)
        return executable.flatMap { $0.isEmpty ? nil : $0 } ?? "DataProtection"
    }

    /// The socket path this client connected to.
    public let socketPath: String
    /// The user id the daemon sees for this process; files live in its namespace.
    public var uid: UInt32 { connection.uid }
    /// The group id the daemon sees for this process.
    public var gid: UInt32 { connection.gid }
    /// The largest piece of content one request carries; larger reads and
    /// writes are split into pieces of this size.
    public var maximumChunkSize: Int { connection.maximumChunkSize }

    let connection: Connection
    let subscription = Subscription()
    /// The name given to `connect`.
    let clientName: String

    private init(socketPath: String, clientName: String, connection: Connection) {
        self.socketPath = socketPath
        self.clientName = clientName
        self.connection = connection
    }

    /// Connects to protd and says hello.
    ///
    /// The socket path is `socketPath` if given, else the environment
    /// variable `PROTD_SOCKET` if set and not empty, else `defaultSocketPath`.
    /// Fails with `.daemonUnavailable` when the socket cannot be reached
    /// (missing, refused, not permitted) and `.unsupportedVersion` when the
    /// daemon speaks another protocol version. `requestTimeout` bounds each
    /// wait for the daemon (at least one second).
    public static func connect(socketPath: String? = nil,
                               clientName: String = DataProtectionClient.defaultClientName,
                               requestTimeout: Duration = DataProtectionClient.defaultRequestTimeout)
        async throws(DataProtectionError) -> DataProtectionClient {
        guard requestTimeout >= .seconds(1) else {
            throw .invalidArgument("the request timeout must be at least one second")
        }
        let path = socketPath ?? environmentSocketPath() ?? defaultSocketPath
        let connection = try await Connection.open(socketPath: path, clientName: clientName, timeout: requestTimeout)
        return DataProtectionClient(socketPath: path, clientName: clientName, connection: connection)
    }

    private static func environmentSocketPath() -> String? {
        guard let raw = getenv(socketPathEnvironmentVariable) else { return nil }
        let value = String(cString: raw)
        return value.isEmpty ? nil : value
    }

    /// Closes the connection. Waiting and later calls fail with
    /// `.clientClosed`, open handles die, and `events` finishes. Calling it
    /// again does nothing.
    public func close() async {
        await connection.close()
    }

    // MARK: Files

    /// The file called `name` in this user's namespace (nothing is sent yet).
    public func file(_ name: String) -> ProtectedFile {
        ProtectedFile(name: name, client: self)
    }

    /// The files whose names start with `prefix`, with their attributes.
    public func list(prefix: String = "") async throws(DataProtectionError) -> [FileAttributes] {
        let frames = try await connection.exchange(.list(prefix: try WireText.name(prefix)), shape: .untilEnd)
        var files: [FileAttributes] = []
        for frame in frames {
            switch frame {
            case .listChunk(let entries): files.append(contentsOf: entries.map(FileAttributes.init))
            case .end: break
            default: throw .unexpected(frame, to: "list")
            }
        }
        return files
    }

    // MARK: Lock state

    /// The daemon's lock state and failed-attempt record.
    public func status() async throws(DataProtectionError) -> DaemonStatus {
        let response = try await connection.single(.status)
        guard case .status(let report) = response else { throw .unexpected(response, to: "status") }
        return DaemonStatus(report)
    }

    /// True when files of every class can be read now: unlocked, locking,
    /// or no passcode set.
    public var isProtectedDataAvailable: Bool {
        get async throws(DataProtectionError) { try await status().isProtectedDataAvailable }
    }

    /// Locks: starts the grace period (`grace`, or the daemon's configured
    /// one when nil) after which class `.complete` data is unavailable.
    /// With `waitUntilLocked` this returns once protected data is
    /// unavailable (`locked`, or still `beforeFirstUnlock`); an `unlock` or
    /// erase meanwhile cancels the lock and this throws
    /// `.protectedDataUnavailable`. Without it, this returns as soon as the
    /// lock has started. Needs root or the admin
    /// group (`.permissionDenied`) and a passcode (`.noPasscodeSet`). If
    /// this client iterates `events`, the lock also waits for its
    /// acknowledgement, like any other subscriber's, until the grace period ends.
    /// `reason` (`.requested` or `.suspend`; the others are the daemon's,
    /// `.invalidArgument`) goes into the lock's events.
    public func lock(grace: Duration? = nil, waitUntilLocked: Bool = true,
                     reason: LockReason = .requested) async throws(DataProtectionError) {
        let milliseconds = try grace.map { duration throws(DataProtectionError) in try Self.milliseconds(duration) }
        var timeout: Duration? = nil
        if waitUntilLocked {
            // The answer comes when the grace period ends at the latest.
            let period = if let grace { grace } else { try await status().gracePeriod }
            timeout = connection.router.timeout + period
        }
        try await connection.expectOK(.lock(graceMilliseconds: milliseconds, waitUntilLocked: waitUntilLocked,
                                            reason: reason), "lock", timeout: timeout)
    }

    /// Unlocks with the passcode. Fails with `.wrongPasscode` or, after
    /// repeated failures, `.rateLimited`.
    public func unlock(passcode: String) async throws(DataProtectionError) {
        var secret = Array(passcode.utf8)
        defer { secret.wipe() }
        try await connection.expectOK(.unlock(passcode: secret), "unlock")
    }

    /// Unlocks at the login of `uid` (a PAM module's unlock, docs/pam.md):
    /// a wrong passcode counts against that user's own failed attempts and
    /// delays, not the machine's, and never erases. Only root may name
    /// another uid than its own.
    public func unlock(passcode: String, atLoginOf uid: UInt32) async throws(DataProtectionError) {
        var secret = Array(passcode.utf8)
        defer { secret.wipe() }
        try await connection.expectOK(.loginUnlock(uid: uid, passcode: secret), "unlock")
    }

    /// Sets the passcode (`old` nil, when none is set) or changes it (`old`
    /// is the current passcode). Needs root or the admin group.
    public func setPasscode(_ new: String, old: String? = nil) async throws(DataProtectionError) {
        var newSecret = Array(new.utf8)
        var oldSecret = old.map { Array($0.utf8) }
        defer {
            newSecret.wipe()
            oldSecret?.wipe()
        }
        try await connection.expectOK(.passwd(old: oldSecret, new: newSecret), "passwd")
    }

    /// Makes a recovery key, given the current passcode (checked and
    /// counted like an unlock), replacing any earlier one. protd keeps no
    /// copy: show its `text` to the person once. Needs root or the admin
    /// group (`.permissionDenied`) and a passcode (`.noPasscodeSet`).
    public func createRecoveryKey(passcode: String) async throws(DataProtectionError) -> RecoveryKey {
        var secret = Array(passcode.utf8)
        defer { secret.wipe() }
        let response = try await connection.single(.recoveryCreate(passcode: secret))
        guard case .recoveryKey(let bytes) = response else { throw .unexpected(response, to: "recoveryCreate") }
        return try RecoveryKey(bytes: bytes)
    }

    /// Deletes the recovery key: it resets nothing afterwards. Needs root
    /// or the admin group.
    public func removeRecoveryKey() async throws(DataProtectionError) {
        try await connection.expectOK(.recoveryRemove, "recoveryRemove")
    }

    /// Sets a new passcode with the recovery key, for a forgotten passcode,
    /// and unlocks; every file stays readable and the recovery key stays
    /// valid. Needs no privileges. A wrong key is a failed attempt, like a
    /// wrong passcode at unlock (`.wrongPasscode`, then `.rateLimited`);
    /// with no recovery key set it fails with `.notFound`.
    public func resetPasscode(recoveryKey: RecoveryKey, newPasscode: String) async throws(DataProtectionError) {
        var secret = Array(newPasscode.utf8)
        defer { secret.wipe() }
        try await connection.expectOK(.recoveryReset(recoveryKey: recoveryKey.bytes, newPasscode: secret), "recoveryReset")
    }

    /// Checks the daemon's store on disk, changing nothing: every name,
    /// header and length, and the key slot and header tag of every file
    /// whose class key is in memory. Needs root or the admin group
    /// (`.permissionDenied`). A large store takes a while: `timeout` bounds
    /// the wait (the client's request timeout when nil).
    public func checkStore(timeout: Duration? = nil) async throws(DataProtectionError) -> StoreCheckReport {
        let response = try await connection.single(.check, timeout: timeout)
        guard case .checkReport(let report) = response else { throw .unexpected(response, to: "check") }
        return report
    }

    /// Destroys every key: every protected file becomes unreadable at once.
    /// Needs root.
    public func erase() async throws(DataProtectionError) {
        try await connection.expectOK(.erase, "erase")
    }

    // MARK: Events

    /// The lock-state events of this client (see `ProtectionEvents`).
    public var events: ProtectionEvents { ProtectionEvents(client: self) }

    /// Subscribes to events if this client is not subscribed yet, and returns
    /// the current status to resynchronise from: events that follow have a
    /// `sequence` above its `eventSequence`. When already subscribed it asks
    /// for a fresh `status()` instead of subscribing twice.
    public func subscribe() async throws(DataProtectionError) -> DaemonStatus {
        let (status, sentNow) = try await subscription.ensure(connection)
        return sentNow ? status : try await self.status()
    }

    /// Subscribes if need be, then calls `observer` with every event from
    /// now on, in order, on the connection's I/O thread as soon as it
    /// arrives: the quickest way to learn of a lock and to acknowledge it
    /// (return `.acknowledge`), without the task switches an `events`
    /// iterator takes. The observer holds up the answers and events of
    /// every client in this process while it runs (they share one I/O
    /// thread), so it must return quickly and never block; hand longer work
    /// to a task. Keep the returned `EventObservation`: the
    /// observer stops when it is released or cancelled, and when the
    /// connection closes (an `events` iterator finishes then; an observer
    /// is simply no longer called).
    public func observeEvents(_ observer: @escaping EventObserver) async throws(DataProtectionError) -> EventObservation {
        let observation = EventObservation(router: connection.router, key: try connection.router.addObserver(observer))
        try await subscription.ensure(connection)
        return observation
    }

    /// Acknowledges a `willBecomeUnavailable` event once this client has
    /// closed its class `.complete` files, so the lock need not wait for the
    /// rest of the grace period. Returns as soon as the acknowledgement is
    /// on its way: the daemon does not answer it, and should the connection
    /// fail first, the daemon counts the departure as an acknowledgement.
    /// Throws `.invalidArgument` before this client has subscribed.
    public func acknowledge(_ event: ProtectionEvent) async throws(DataProtectionError) {
        guard connection.router.isSubscribed else {
            throw .invalidArgument("acknowledge needs a subscription: iterate events or call subscribe() first")
        }
        try await connection.sendIgnoringAnswer(.acknowledge(sequence: event.sequence))
    }

    // MARK: Helpers

    private static func milliseconds(_ duration: Duration) throws(DataProtectionError) -> UInt32 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else {
            throw .invalidArgument("the grace period must not be negative")
        }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        let total = whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        guard !overflow, !total.overflow, let milliseconds = UInt32(exactly: total.partialValue) else {
            throw .invalidArgument("the grace period must be shorter than \(UInt32.max) milliseconds")
        }
        return milliseconds
    }
}

extension [UInt8] {
    /// Overwrites this copy of a passcode with zeros (best effort: the
    /// string it came from and the frame that was sent are out of reach).
    mutating func wipe() { Zeroing.wipe(&self) }
}
