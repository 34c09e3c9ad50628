internal import Glibc
internal import Synchronization

/// One store per state directory: an exclusive `flock(2)` on the directory
/// itself, held from start to `release()` (shutdown). A second daemon
/// started on the same directory by mistake stops at once, before it
/// removes the first one's temporary files as crash leftovers or writes
/// its key bag.
final class StateDirectoryLock: Sendable {
    private let descriptor: Mutex<Int32?>

    /// Takes the lock; fails at once if another process holds it.
    init(directory: String) throws {
        let fd = try Posix.open(directory, O_RDONLY | O_DIRECTORY)
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(fd)
            guard code == EWOULDBLOCK else { throw Posix.error("lock", directory, errno: code) }
            throw ProtectionError(.ioFailure, "another protd is already using the state directory \(directory)")
        }
        descriptor = Mutex(fd)
    }

    /// Lets go of the lock; later calls do nothing.
    func release() {
        descriptor.withLock { fd in
            if let open = fd { close(open) }
            fd = nil
        }
    }

    deinit { release() }
}
