/// Optional storage limits for each uid namespace (`limits.quota-bytes-per-uid`,
/// `limits.quota-files-per-uid`); 0 is no limit.
public struct StorageQuota: Sendable, Equatable {
    /// Most plaintext bytes (the sizes `list` reports) a namespace's files
    /// may hold together; 0 for no limit.
    public var bytes: Int
    /// Most files a namespace may have; 0 for no limit.
    public var files: Int

    /// A quota; the defaults are no quota.
    public init(bytes: Int = 0, files: Int = 0) {
        self.bytes = bytes
        self.files = files
    }

    /// Whether any limit is set.
    public var isOn: Bool { bytes > 0 || files > 0 }
}

/// Counts each namespace's files and plaintext bytes against a
/// `StorageQuota`, and refuses growth past it with `quotaExceeded`.
///
/// A namespace is measured (its files listed) when it is first charged;
/// from then on the changes operations report keep the count. Operations
/// in progress reserve what they may add (`reserve`) and settle it when
/// they end (`settle`). Before refusing, the namespace is measured again,
/// so a count that drifted (a handle writing to a file that was deleted or
/// replaced meanwhile) never refuses wrongly. With no quota set, nothing is
/// counted and nothing is measured.
final class NamespaceQuota: Sendable {
    /// Files and bytes.
    struct Amount: Equatable {
        var bytes = 0
        var files = 0

        static func + (left: Amount, right: Amount) -> Amount {
            Amount(bytes: left.bytes + right.bytes, files: left.files + right.files)
        }

        static func - (left: Amount, right: Amount) -> Amount {
            Amount(bytes: left.bytes - right.bytes, files: left.files - right.files)
        }
    }

    private struct Account {
        /// What the namespace's files hold.
        var stored: Amount
        /// What operations in progress may still add.
        var reserved = Amount()
    }

    /// The limits.
    let limits: StorageQuota
    private let accounts = LockedState<[UInt32: Account]>([:])
    private let measure: @Sendable (Namespace) throws -> Amount

    /// A quota whose namespaces are measured by `measure`.
    init(_ limits: StorageQuota, measure: @escaping @Sendable (Namespace) throws -> Amount) {
        self.limits = limits
        self.measure = measure
    }

    /// Reserves `amount` more for an operation about to run in `namespace`;
    /// throws `quotaExceeded` when what is stored and reserved would then
    /// pass a limit. Amounts that do not grow are always granted.
    func reserve(_ amount: Amount, in namespace: Namespace) throws {
        guard limits.isOn else { return }
        var measured = accounts.withLock { $0[namespace.uid] } == nil ? try measure(namespace) : nil
        for remeasured in [false, true] {
            if remeasured { measured = try measure(namespace) }
            let refusal = accounts.withLock { accounts -> ProtectionError? in
                var account = accounts[namespace.uid] ?? Account(stored: measured ?? Amount())
                if let measured { account.stored = measured }
                if let refusal = self.refusal(adding: amount, to: account, in: namespace) {
                    accounts[namespace.uid] = account
                    return refusal
                }
                account.reserved = account.reserved + amount
                accounts[namespace.uid] = account
                return nil
            }
            guard let refusal else { return }
            if remeasured { throw refusal }
        }
    }

    /// Ends an operation's reservation: `reserved` is given back, and
    /// `stored` (what the operation added; negative for what it removed)
    /// is counted.
    func settle(reserved: Amount, stored: Amount, in namespace: Namespace) {
        guard limits.isOn else { return }
        accounts.withLock { accounts in
            // A namespace forgotten meanwhile (an erase) is measured anew.
            guard var account = accounts[namespace.uid] else { return }
            account.reserved = account.reserved - reserved
            account.stored = account.stored + stored
            accounts[namespace.uid] = account
        }
    }

    /// Forgets every count, after an erase removed the files.
    func forgetAll() {
        accounts.withLock { $0.removeAll() }
    }

    /// Why `amount` may not be added to `account`, or nil when it may.
    private func refusal(adding amount: Amount, to account: Account, in namespace: Namespace) -> ProtectionError? {
        let total = account.stored + account.reserved
        if amount.files > 0, limits.files > 0, amount.files > limits.files - total.files {
            return ProtectionError(.quotaExceeded, "uid \(namespace.uid) already has \(total.files) files, "
                                   + "the most limits.quota-files-per-uid allows; delete some first")
        }
        if amount.bytes > 0, limits.bytes > 0, amount.bytes > limits.bytes - total.bytes {
            return ProtectionError(.quotaExceeded, "this needs \(amount.bytes) more bytes but uid \(namespace.uid)'s "
                                   + "files hold \(total.bytes) of the \(limits.bytes) limits.quota-bytes-per-uid allows")
        }
        return nil
    }
}

/// One operation's share of a `NamespaceQuota`: what it reserved so far,
/// against the size its file had when it began. Given back when the
/// operation ends, or when it is dropped unfinished. Use from one task at a
/// time, like the write or handle call it belongs to.
final class QuotaCharge: @unchecked Sendable {
    private let quota: NamespaceQuota
    private let namespace: Namespace
    /// The file's plaintext size when the operation began (or when
    /// `measureBaseline` last ran); nil when there was no file.
    private var baseline: Int?
    /// Measures the file the operation replaces again, for `measureBaseline`.
    private let measure: (() -> Int?)?
    private var reserved = NamespaceQuota.Amount()
    private var settled = false

    /// Starts charging an operation on a file of `baseline` bytes (nil: no
    /// file yet); nothing is reserved until `grow`. `measure` gives the
    /// baseline anew, for an operation that replaces the file later.
    init(_ quota: NamespaceQuota, in namespace: Namespace, baseline: Int?, measure: (() -> Int?)? = nil) {
        self.quota = quota
        self.namespace = namespace
        self.baseline = baseline
        self.measure = measure
    }

    /// Takes the file's size now as the baseline: right before a
    /// whole-file write replaces it, since a delete or another write may
    /// have changed it since the write began (and counted that change).
    /// What is reserved stays; `grow` then reserves what the new baseline
    /// asks more.
    func measureBaseline() {
        if let measure { baseline = measure() }
    }

    /// Reserves what the file would add by being there with `size` bytes:
    /// the bytes beyond its baseline, and a file when there was none.
    func grow(toSize size: Int) throws {
        let wanted = NamespaceQuota.Amount(bytes: max(0, size - (baseline ?? 0)), files: baseline == nil ? 1 : 0)
        let more = NamespaceQuota.Amount(bytes: max(0, wanted.bytes - reserved.bytes),
                                         files: max(0, wanted.files - reserved.files))
        guard more != NamespaceQuota.Amount() else { return }
        try quota.reserve(more, in: namespace)
        reserved = reserved + more
    }

    /// The operation left a file of `size` bytes (nil: no file).
    func finish(size: Int?) {
        guard !settled else { return }
        settled = true
        let before = NamespaceQuota.Amount(bytes: baseline ?? 0, files: baseline == nil ? 0 : 1)
        let after = NamespaceQuota.Amount(bytes: size ?? 0, files: size == nil ? 0 : 1)
        quota.settle(reserved: reserved, stored: after - before, in: namespace)
    }

    /// The operation changed nothing.
    func cancel() { finish(size: baseline) }

    deinit { cancel() }
}

extension NamespaceQuota {
    /// A charge for an operation that gives the file at `path` new content
    /// or removes it (a whole-file write, a delete): its baseline is the
    /// file's plaintext size (`size`), if there is a file. Nil when no
    /// quota is set.
    func charge(replacing path: String, in namespace: Namespace, size: @escaping () -> Int?) -> QuotaCharge? {
        guard limits.isOn else { return nil }
        let measure = { Posix.exists(path) ? size() ?? 0 : nil }
        return QuotaCharge(self, in: namespace, baseline: measure(), measure: measure)
    }

    /// A charge for an open that may create the file at `path`: one more
    /// file, reserved now. Nil when no quota is set or the file exists.
    func charge(creating path: String, in namespace: Namespace) throws -> QuotaCharge? {
        guard limits.isOn, !Posix.exists(path) else { return nil }
        let charge = QuotaCharge(self, in: namespace, baseline: nil)
        try charge.grow(toSize: 0)
        return charge
    }

    /// Runs `body`, which changes a file of `size` bytes to at most
    /// `newSize` (a handle's write, append or truncate), charging what it
    /// adds; `resultingSize` is the file's size after.
    func charging<R>(_ namespace: Namespace, from size: Int, to newSize: Int, resultingSize: () -> Int,
                     _ body: () throws -> R) throws -> R {
        guard limits.isOn else { return try body() }
        let charge = QuotaCharge(self, in: namespace, baseline: size)
        try charge.grow(toSize: newSize)
        defer { charge.finish(size: resultingSize()) }
        return try body()
    }

    /// What `files` (a namespace's listing) hold together.
    static func amount(of files: [FileAttributes]) -> Amount {
        Amount(bytes: files.reduce(0) { $0 + $1.size }, files: files.count)
    }
}
