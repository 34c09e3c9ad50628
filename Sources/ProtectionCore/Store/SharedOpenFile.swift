internal import Glibc
internal import Synchronization

/// Identifies an inode, so every handle on the same file shares one
/// `SharedOpenFile` (one size, one final segment, one key) even across
/// different names or after the name was replaced by a whole-file write.
struct FileIdentity: Hashable {
    let device: UInt64
    let inode: UInt64

    /// The identity of the file open in `fd`.
    init(fd: Int32, path: String) throws {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Posix.error("stat", path) }
        self.init(info)
    }

    /// The identity of the file `info` describes.
    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// Removes `path` if it still names this file (not another one made
    /// under the same name meanwhile); never follows a link.
    func unlink(ifStillNamedBy path: String) {
        var info = stat()
        guard lstat(path, &info) == 0, FileIdentity(info) == self else { return }
        Glibc.unlink(path)
    }
}

/// One open protected file, shared by all handles on it and by one-off
/// calls by name (read, setProtection) while they run, serialising their
/// calls. It starts out not yet open: its first user opens the file under
/// its lock, so nobody ever opens the file while another user is writing
/// to it. Its file key lives until the last user is done or a lock
/// (class A), erase or shutdown invalidates it.
final class SharedOpenFile: Sendable {
    private enum Phase {
        /// No user has opened the file yet (or every attempt failed).
        case opening
        case open(EncryptedFile)
        case closed
        case invalidated
    }

    let identity: FileIdentity
    private let phase: LockedState<Phase>
    /// Callers waiting for `phase`'s lock (`letWaitersIn`).
    private let waiters = Atomic<Int>(0)
    /// Class and size after the last call that finished, for `stat` and
    /// `list`, which must not wait for a long read or write.
    private let finished = LockedState<(protection: ProtectionClass, size: Int)?>(nil)

    /// A shared file that its first user still has to open (`join`).
    init(identity: FileIdentity) {
        self.identity = identity
        self.phase = LockedState(.opening)
    }

    /// The file's current class (it changes with `setProtection`); `nil`
    /// before it is open and once closed or invalidated.
    var protection: ProtectionClass? {
        withPhase { if case .open(let file) = $0 { file.header.protection } else { nil } }
    }

    /// The file's class and plaintext size when the last call on it
    /// finished, so never in the middle of a write, and without waiting
    /// for a call in progress; `nil` unless open.
    var currentAttributes: (protection: ProtectionClass, size: Int)? {
        finished.withLock { $0 }
    }

    /// Publishes `file`'s class and size for `currentAttributes`; called
    /// with `phase` locked.
    private func publish(_ file: EncryptedFile) {
        finished.withLock { $0 = (file.header.protection, file.size) }
    }

    /// For a new user (a handle being opened, a one-off call), serialised
    /// with every other caller: runs `open`, which opens the file with the
    /// caller's keys. When nobody has opened the file yet, that file
    /// becomes the shared one; otherwise it only proved the caller may
    /// open the file (for a class B file, that it is unlocked) and is
    /// closed. Then runs `body` on the shared file. With `creating`, `open`
    /// writes a new file, so it must be the first.
    func join<R>(
        on name: FileName, creating: Bool = false, open: () throws -> EncryptedFile,
        _ body: (EncryptedFile) throws -> R
    ) throws -> R {
        try withPhase { phase in
            switch phase {
            case .closed:
                throw ProtectionError.handleClosed(name)
            case .invalidated:
                throw ProtectionError.closedWhileOpening(name)
            case .opening:
                let file = try ProtectionError.translating(open)
                phase = .open(file)
                defer { publish(file) }
                return try ProtectionError.translating { try body(file) }
            case .open(let file):
                if creating { throw ProtectionError(.alreadyExists, "a file named \(name) already exists") }
                try ProtectionError.translating(open).close()
                defer { publish(file) }
                return try ProtectionError.translating { try body(file) }
            }
        }
    }

    /// Runs `body`, serialised with every other caller, when nobody has
    /// the file open, and leaves it unopened: a one-off read that unwraps,
    /// uses and wipes its own key. Nil when the file is open (or closed, or
    /// invalidated); the caller then joins it the usual way.
    func whileUnopened<R>(_ body: () throws -> R) throws -> R? {
        try withPhase { phase in
            guard case .opening = phase else { return nil }
            return try ProtectionError.translating(body)
        }
    }

    /// Runs `body`, which reads the inode from disk itself, serialised
    /// with every other caller, whatever the phase (`StoreCheck`).
    func serialised(_ body: () -> Void) {
        withPhase { _ in body() }
    }

    /// Runs `body` on the file, serialised with every other caller.
    func perform<R>(on name: FileName, _ body: (EncryptedFile) throws -> R) throws -> R {
        try withPhase { phase in
            switch phase {
            case .opening, .closed:
                throw ProtectionError.handleClosed(name)
            case .invalidated:
                throw ProtectionError.invalidated("the handle on \(name)")
            case .open(let file):
                defer { publish(file) }
                return try ProtectionError.translating { try body(file) }
            }
        }
    }

    /// Brings the file to stable storage. The fsync runs after the lock is
    /// released (`FileFlush`), so other calls on the file, and a lock or
    /// erase invalidating it, do not wait for the disk.
    func sync(on name: FileName) throws {
        let flush = try perform(on: name) { try $0.flush() }
        try flush.run()
        if flush.includesDirectory { _ = try? perform(on: name) { $0.directoryFlushed() } }
    }

    /// Lets whoever waits for the file have it before the caller's next
    /// call, for at most about 10 ms: between the steps of a long call
    /// (a growth by gigabytes, `ProtectedFileHandle.zeroFilling`). The
    /// file's lock is not fair, so the next step would otherwise take it
    /// again at once, and a lock's invalidation would wait for every step.
    func letWaitersIn() {
        var naps = 0
        while waiters.load(ordering: .relaxed) > 0 && naps < 100 {
            usleep(100)
            naps += 1
        }
    }

    /// `phase`'s lock, counted in `waiters` while it waits for it.
    private func withPhase<R>(_ body: (inout Phase) throws -> R) rethrows -> R {
        waiters.add(1, ordering: .relaxed)
        return try phase.withLock { phase in
            waiters.subtract(1, ordering: .relaxed)
            return try body(&phase)
        }
    }

    /// Wipes the key and closes the descriptor (last user done).
    func close() { finish(.closed) }

    /// Wipes the key; later calls fail with `protectedDataUnavailable`.
    func invalidate() { finish(.invalidated) }

    private func finish(_ next: Phase) {
        withPhase { phase in
            switch phase {
            case .open(let file):
                file.close()
                phase = next
            case .opening:
                phase = next
            case .closed, .invalidated:
                return
            }
            finished.withLock { $0 = nil }
        }
    }
}
