internal import Sodium

/// An open protected file: random-access reads and writes, append,
/// truncate, size. The file's key stays in memory while any handle on the
/// file is open and is wiped when the last one closes. A class A file's
/// handles are invalidated when a lock completes (later calls throw
/// `protectedDataUnavailable`); other classes keep working across a lock.
/// Thread-safe; calls on one file are serialised.
public final class ProtectedFileHandle: Sendable {
    /// The handle's number, unique within its store.
    public let id: UInt64
    /// The name the file was opened by.
    public let name: FileName
    /// The namespace the file belongs to.
    public let namespace: Namespace
    private let file: SharedOpenFile
    private let closed = LockedState(false)
    private let onClose: @Sendable (UInt64) -> Void
    /// Charged for what writes add to the file.
    private let quota: NamespaceQuota

    init(id: UInt64, name: FileName, namespace: Namespace, file: SharedOpenFile, quota: NamespaceQuota,
         onClose: @escaping @Sendable (UInt64) -> Void) {
        self.id = id
        self.name = name
        self.namespace = namespace
        self.file = file
        self.quota = quota
        self.onClose = onClose
    }

    /// The file's class now; `nil` once the handle is closed or invalidated.
    public var protection: ProtectionClass? {
        isClosed ? nil : file.protection
    }

    /// Up to `count` bytes from `offset`; fewer at end of file.
    public func read(offset: Int, count: Int) throws -> [UInt8] {
        try withFile { try $0.read(offset: offset, count: count) }
    }

    /// Decrypts up to `count` bytes from `offset` into `destination`
    /// (which must hold them); returns how many, fewer at end of file.
    public func read(offset: Int, count: Int, into destination: UnsafeMutableRawBufferPointer) throws -> Int {
        try withFile { try $0.read(offset: offset, count: count, into: destination) }
    }

    /// One chunk of a read made of several calls that must see one version
    /// of the file: like `read(offset:count:into:)`, but throws
    /// `fileChanged` when a handle wrote or truncated the file since
    /// `version`, the version an earlier chunk returned (nil for the first).
    public func read(offset: Int, count: Int, into destination: UnsafeMutableRawBufferPointer,
                     sameVersionAs version: UInt64?) throws -> (count: Int, version: UInt64) {
        try withFile { file in
            if let version, version != file.version {
                throw ProtectionError(.fileChanged, "\(name) was changed through a handle while it was being read; "
                                      + "read it again")
            }
            return (try file.read(offset: offset, count: count, into: destination), file.version)
        }
    }

    /// Writes `bytes` at `offset`, growing the file (zeros fill a gap).
    public func write(_ bytes: [UInt8], at offset: Int) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// Writes `bytes` at `offset`, growing the file (zeros fill a gap, in
    /// steps: `zeroFilling(upTo:callEnd:)`).
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws {
        let (end, overflow) = offset.addingReportingOverflow(bytes.count)
        try zeroFilling(upTo: offset, callEnd: overflow ? .max : end)
        try withFile(growingTo: { max($0.size, end) }) { file in
            try file.write(bytes, at: offset)
        }
    }

    /// Writes `bytes` at the end; returns the new size.
    @discardableResult
    public func append(_ bytes: [UInt8]) throws -> Int {
        try bytes.withUnsafeBytes { try append($0) }
    }

    /// Writes `bytes` at the end; returns the new size.
    @discardableResult
    public func append(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        try withFile(growingTo: { $0.size + bytes.count }) { file in
            try file.write(bytes, at: file.size)
            return file.size
        }
    }

    /// Cuts or zero-extends the file to `size` bytes (growing it in steps:
    /// `zeroFilling(upTo:callEnd:)`).
    public func truncate(to size: Int) throws {
        try zeroFilling(upTo: size, callEnd: size)
        try withFile(growingTo: { _ in size }) { try $0.truncate(to: size) }
    }

    /// The plaintext size in bytes.
    public func size() throws -> Int {
        try withFile { $0.size }
    }

    /// Flushes written content to stable storage.
    public func sync() throws {
        try checkNotClosed()
        try file.sync(on: name)
    }

    /// Closes this handle; the file's key is wiped when it was the last
    /// one. Idempotent.
    public func close() {
        let wasOpen = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if wasOpen { onClose(id) }
    }

    /// Whether calls can still succeed: not closed, not invalidated.
    public var isOpen: Bool { !isClosed && file.protection != nil }

    private var isClosed: Bool { closed.withLock { $0 } }

    private func withFile<R>(_ body: (EncryptedFile) throws -> R) throws -> R {
        try checkNotClosed()
        return try file.perform(on: name, body)
    }

    /// `withFile` for a call that may grow the file to `newSize`: the
    /// growth is charged to the namespace's quota first. A size the format
    /// cannot hold is not charged: the call fails with `invalidArgument`.
    private func withFile<R>(growingTo newSize: (EncryptedFile) -> Int, _ body: (EncryptedFile) throws -> R) throws -> R {
        try withFile { file in
            let size = newSize(file)
            let charged = (0...EncryptedFile.maximumSize).contains(size) ? size : file.size
            return try quota.charging(namespace, from: file.size, to: charged, resultingSize: { file.size }) { try body(file) }
        }
    }

    /// Most zeros one call on the file seals while it holds the file: a
    /// gap larger than this is filled in steps of it, each a call of its
    /// own, so a lock that invalidates the file, and every other user of
    /// it, waits for one step (some milliseconds), not for gigabytes.
    public static let zeroFillStep = 16 << 20

    /// Grows the file with zeros, a step at a time, until `gapEnd` is at
    /// most one step past its end; the caller's own call, which ends at
    /// `callEnd`, does the rest. The quota is checked for the whole call
    /// first, so it refuses before the first step, and counts what the
    /// steps added (not the size after them: other handles' calls between
    /// the steps count their own changes). A step can still fail on its
    /// own (a full disk, a lock invalidating the file), as can the last
    /// part when another call of the uid took the room meanwhile: the
    /// steps before stay, as zeros.
    private func zeroFilling(upTo gapEnd: Int, callEnd: Int) throws {
        guard (0...EncryptedFile.maximumSize).contains(callEnd), leavesLongGap(upTo: gapEnd) else { return }
        let start = try withFile { $0.size }
        guard gapEnd - start > Self.zeroFillStep else { return }
        var added = 0
        try quota.charging(namespace, from: start, to: callEnd, resultingSize: { start + added }) {
            while try withFile({ file in
                guard gapEnd - file.size > Self.zeroFillStep else { return false }
                let before = file.size
                try file.truncate(to: before + Self.zeroFillStep)
                added += file.size - before
                return true
            }) {
                self.file.letWaitersIn()
            }
        }
    }

    /// Whether a call that writes from `offset` (or truncates to it)
    /// leaves a gap of zeros longer than `zeroFillStep`, by the size the
    /// file had after its last call: asked without waiting for the file,
    /// so the usual write, within the file, pays nothing for it.
    public func leavesLongGap(upTo offset: Int) -> Bool {
        offset > Self.zeroFillStep && offset - (file.currentAttributes?.size ?? 0) > Self.zeroFillStep
    }

    private func checkNotClosed() throws {
        if isClosed { throw ProtectionError.handleClosed(name) }
    }

    deinit { close() }
}

extension ProtectionError {
    /// Runs `body`, turning libsodium failures into ProtectionErrors: a key
    /// wiped mid-operation by a lock means the data became unavailable.
    static func translating<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as SodiumError {
            switch error.code {
            case .secretWiped:
                throw ProtectionError(.protectedDataUnavailable, "protected data became unavailable: the device locked")
            case .authenticationFailed:
                throw ProtectionError.integrity("data does not authenticate")
            default:
                throw ProtectionError(.ioFailure, error.message)
            }
        }
    }
}
