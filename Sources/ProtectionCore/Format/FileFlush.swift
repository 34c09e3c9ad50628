internal import Glibc
internal import Synchronization

/// An fsync of one protected file (and, after a create, of its directory)
/// that runs without the file's lock. fsync needs no key, and a lock, an
/// erase or shutdown must be able to wipe keys without waiting for the
/// disk. It works on a duplicate of the file's descriptor, so the file may
/// be closed or invalidated meanwhile.
package final class FileFlush: Sendable {
    private let fd: Int32
    private let path: String
    /// The directory holding the file, opened with it, when it is flushed too.
    private let directoryFD: Int32?

    /// Duplicates `fd` (close-on-exec) and, with `includesDirectory`, opens
    /// the file's directory; taken with the file's lock held, so an erase
    /// removing the directory later does not change what is flushed.
    init(duplicating fd: Int32, path: String, includesDirectory: Bool) throws {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw Posix.error("dup", path) }
        do {
            directoryFD = includesDirectory ? try Posix.open(Posix.parentDirectory(of: path), O_RDONLY | O_DIRECTORY) : nil
        } catch {
            close(copy)
            throw error
        }
        self.fd = copy
        self.path = path
    }

    /// Whether the directory holding the file is flushed too.
    var includesDirectory: Bool { directoryFD != nil }

    /// Flushes the file's content, then its directory when needed.
    func run() throws {
        #if DEBUG
        FileFlush.hook.withLock { $0 }?(path)
        #endif
        try Posix.fsync(fd, path: path)
        if let directoryFD { try Posix.fsync(directoryFD, path: Posix.parentDirectory(of: path)) }
    }

    deinit {
        close(fd)
        if let directoryFD { close(directoryFD) }
    }

    #if DEBUG
    private static let hook = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Sets (nil clears) a function called with the file's path as each
    /// flush starts; tests hold a flush there to see who waits for it.
    /// Debug builds only.
    package static func setHookForTesting(_ body: (@Sendable (String) -> Void)?) {
        hook.withLock { $0 = body }
    }
    #endif
}
