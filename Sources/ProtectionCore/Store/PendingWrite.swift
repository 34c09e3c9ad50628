internal import Sodium

/// A whole-file write in progress: content is appended in pieces (so a
/// large file is never held in memory) into a temporary file; `commit()`
/// atomically replaces the target, `abort()` (or dropping it) leaves the
/// old content. Use from one task at a time.
public final class PendingWrite: @unchecked Sendable {
    /// The file being written.
    public let name: FileName
    /// The class of the new file.
    public let protection: ProtectionClass
    private let transaction: AtomicFileTransaction
    private let writer: SegmentStreamWriter
    private let durable: Bool
    private var done = false
    /// The write's share of the namespace's quota; nil when none is set.
    var quotaCharge: QuotaCharge?
    /// The class keys' use this write holds until its file has its name
    /// or is dropped (`HeaderRewrap`).
    var keyUse: KeyUse?
    /// Runs once the new file has its name (`FileStore.restoreSidecar`).
    var published: () -> Void = {}

    init(name: FileName, protection: ProtectionClass, transaction: AtomicFileTransaction, writer: SegmentStreamWriter,
         durable: Bool) {
        self.name = name
        self.protection = protection
        self.transaction = transaction
        self.writer = writer
        self.durable = durable
    }

    /// Bytes appended so far.
    public var size: Int { writer.size }

    /// Appends content.
    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard !done else { throw ProtectionError(.handleClosed, "the write of \(name) is already finished") }
        do {
            try quotaCharge?.grow(toSize: writer.size + bytes.count)
            try ProtectionError.translating { try writer.append(bytes) }
        } catch {
            abort()
            throw error
        }
    }

    /// Appends content.
    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try append($0) }
    }

    /// Finishes the file and renames it over the target; returns its size.
    @discardableResult
    public func commit() throws -> Int {
        guard !done else { throw ProtectionError(.handleClosed, "the write of \(name) is already finished") }
        done = true
        do {
            try ProtectionError.translating { try writer.finish() }
            // Charged against what it replaces now: a delete or another
            // write since the start changed that (and was counted).
            try name.speaking(existing: false) {
                try transaction.commit(durable: durable) {
                    quotaCharge?.measureBaseline()
                    try quotaCharge?.grow(toSize: writer.size)
                }
            }
        } catch {
            writer.discard()
            transaction.abort()
            keyUse?.end()
            // Only a failed directory fsync comes after the rename: the
            // new content is there, and counted.
            if transaction.renamed {
                quotaCharge?.finish(size: writer.size)
                published()
            } else {
                quotaCharge?.cancel()
            }
            throw error
        }
        quotaCharge?.finish(size: writer.size)
        keyUse?.end()
        published()
        return writer.size
    }

    /// Called when a lock completes during a class A write: wipes the new
    /// file's key and the plaintext held back, so the write fails with
    /// `protectedDataUnavailable`.
    func invalidate() { writer.discard() }

    /// Drops the temporary file; the old content stays. Idempotent.
    public func abort() {
        done = true
        writer.discard()
        transaction.abort()
        quotaCharge?.cancel()
        keyUse?.end()
    }

    deinit { abort() }
}
