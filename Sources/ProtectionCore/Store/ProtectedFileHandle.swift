internal import Sodium

/// An open protected file: random-access reads and writes, append,
/// truncate, size. It holds the file's key while open and wipes it on
/// `close()`. A class A handle is invalidated when a lock completes (later
/// calls throw `protectedDataUnavailable`); handles of other classes keep
/// working across a lock. Thread-safe; calls are serialised.
public final class ProtectedFileHandle: Sendable {
    private enum Phase {
        case open(EncryptedFile)
        case closed
        case invalidated
    }

    /// The handle's number, unique within its store.
    public let id: UInt64
    /// The file's name.
    public let name: FileName
    /// The namespace the file belongs to.
    public let namespace: Namespace
    /// The file's class when it was opened.
    public let protection: ProtectionClass
    private let phase: LockedState<Phase>
    private let onClose: @Sendable (UInt64) -> Void

    init(id: UInt64, name: FileName, namespace: Namespace, file: EncryptedFile,
         onClose: @escaping @Sendable (UInt64) -> Void) {
        self.id = id
        self.name = name
        self.namespace = namespace
        self.protection = file.header.protection
        self.phase = LockedState(.open(file))
        self.onClose = onClose
    }

    /// Up to `count` bytes from `offset`; fewer at end of file.
    public func read(offset: Int, count: Int) throws -> [UInt8] {
        try withFile { try $0.read(offset: offset, count: count) }
    }

    /// Writes `bytes` at `offset`, growing the file (zeros fill a gap).
    public func write(_ bytes: [UInt8], at offset: Int) throws {
        try withFile { file in try bytes.withUnsafeBytes { try file.write($0, at: offset) } }
    }

    /// Writes `bytes` at the end; returns the new size.
    @discardableResult
    public func append(_ bytes: [UInt8]) throws -> Int {
        try withFile { file in
            try bytes.withUnsafeBytes { try file.write($0, at: file.size) }
            return file.size
        }
    }

    /// Cuts or zero-extends the file to `size` bytes.
    public func truncate(to size: Int) throws {
        try withFile { try $0.truncate(to: size) }
    }

    /// The plaintext size in bytes.
    public func size() throws -> Int {
        try withFile { $0.size }
    }

    /// Flushes written content to stable storage.
    public func sync() throws {
        try withFile { try $0.sync() }
    }

    /// Wipes the key and closes the file. Idempotent.
    public func close() {
        let wasOpen = phase.withLock { phase -> Bool in
            guard case .open(let file) = phase else { return false }
            file.close()
            phase = .closed
            return true
        }
        if wasOpen { onClose(id) }
    }

    /// Called when a lock completes (class A) or the store is erased or
    /// shut down: wipes the key; later calls fail with `protectedDataUnavailable`.
    func invalidate() {
        phase.withLock { phase in
            guard case .open(let file) = phase else { return }
            file.close()
            phase = .invalidated
        }
    }

    /// Whether the handle is still usable.
    public var isOpen: Bool {
        phase.withLock { if case .open = $0 { true } else { false } }
    }

    private func withFile<R>(_ body: (EncryptedFile) throws -> R) throws -> R {
        try phase.withLock { phase in
            switch phase {
            case .closed:
                throw ProtectionError(.handleClosed, "the handle on \(name) is closed")
            case .invalidated:
                throw ProtectionError(.protectedDataUnavailable,
                                      "the handle on \(name) was invalidated by a lock; reopen it after unlocking")
            case .open(let file):
                return try ProtectionError.translating { try body(file) }
            }
        }
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
                throw ProtectionError(.protectedDataUnavailable, "protected data became unavailable (the device locked)")
            case .authenticationFailed:
                throw ProtectionError.integrity("data does not authenticate")
            default:
                throw ProtectionError(.ioFailure, error.message)
            }
        }
    }
}
