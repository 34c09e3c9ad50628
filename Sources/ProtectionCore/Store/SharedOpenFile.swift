internal import Glibc

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
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

/// One open protected file, shared by all handles on it and serialising
/// their calls. Its file key lives until the last handle closes or a lock
/// (class A), erase or shutdown invalidates it.
final class SharedOpenFile: Sendable {
    private enum Phase {
        case open(EncryptedFile)
        case closed
        case invalidated
    }

    let identity: FileIdentity
    private let phase: LockedState<Phase>

    init(_ file: EncryptedFile, identity: FileIdentity) {
        self.identity = identity
        self.phase = LockedState(.open(file))
    }

    /// The file's current class (it changes with `setProtection`); `nil`
    /// once closed or invalidated.
    var protection: ProtectionClass? {
        phase.withLock { if case .open(let file) = $0 { file.header.protection } else { nil } }
    }

    /// Runs `body` on the file, serialised with every other caller.
    func perform<R>(on name: FileName, _ body: (EncryptedFile) throws -> R) throws -> R {
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

    /// Wipes the key and closes the descriptor (last handle closed).
    func close() { finish(.closed) }

    /// Wipes the key; later calls fail with `protectedDataUnavailable`.
    func invalidate() { finish(.invalidated) }

    private func finish(_ next: Phase) {
        phase.withLock { phase in
            guard case .open(let file) = phase else { return }
            file.close()
            phase = next
        }
    }
}
