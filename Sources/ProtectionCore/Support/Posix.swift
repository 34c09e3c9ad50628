internal import Glibc
#if DEBUG
internal import Sodium
internal import Synchronization
#endif

/// Thin, typed wrappers over the POSIX calls the store uses. Each failure
/// becomes a `ProtectionError` naming the operation and the OS reason.
package enum Posix {
    /// The error for a failed call on `path`. Only the last path component
    /// is named, so messages that reach clients do not reveal the daemon's
    /// directory layout.
    static func error(_ operation: String, _ fullPath: String, errno code: Int32 = errno) -> ProtectionError {
        let reason = String(cString: strerror(code))
        let path = PathBytes.lastComponent(of: fullPath)
        let (kind, what): (ProtectionError.Code, String) = switch code {
        case ENOENT: (.notFound, "no such file")
        case EEXIST: (.alreadyExists, "already exists")
        case ENOTDIR, EISDIR, ENAMETOOLONG: (.invalidName, reason)
        default: (.ioFailure, reason)
        }
        return ProtectionError(kind, "\(operation) \(path): \(what)", systemErrno: code)
    }

    #if DEBUG
    /// Disk I/O calls (`open`, `pread`, `pwrite`, `fsync`, `fstat`,
    /// `ftruncate`) the calling thread made while it held a key window open
    /// (`SecretBytes.keyWindowsOpenOnThisThread`). Debug builds only: a
    /// test hook for the rule that no key window spans disk I/O; it stays 0.
    package static var ioInsideKeyWindowOnThisThread: Int { ioInsideKeyWindow.value }
    private static let ioInsideKeyWindow = ThreadLocalCounter()

    /// `fsync` calls the calling thread made. Debug builds only: a test
    /// hook for what a commit makes durable.
    package static var fsyncsOnThisThread: Int { fsyncs.value }
    private static let fsyncs = ThreadLocalCounter()
    #endif

    #if DEBUG
    /// Debug builds only, for crash tests: with N > 0, the process exits
    /// (`_exit(86)`, no cleanup, like `kill -9`) just before its Nth disk
    /// I/O call from now on.
    package static func exitBeforeDiskIOCall(_ n: Int) {
        exitBeforeDiskIOCallCountdown.store(n, ordering: .relaxed)
    }
    private static let exitBeforeDiskIOCallCountdown = Atomic<Int>(0)
    #endif

    /// Counts a disk I/O call made inside a key window, and is the crash
    /// point of `exitBeforeDiskIOCall` (debug builds only).
    @inline(__always)
    private static func noteDiskIO() {
        #if DEBUG
        if SecretBytes.keyWindowsOpenOnThisThread > 0 { ioInsideKeyWindow.add(1) }
        if exitBeforeDiskIOCallCountdown.load(ordering: .relaxed) > 0,
           exitBeforeDiskIOCallCountdown.subtract(1, ordering: .relaxed).newValue == 0 {
            _exit(86)
        }
        #endif
    }

    /// Opens `path`; retries on EINTR.
    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws -> Int32 {
        noteDiskIO()
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw error("open", path) }
        }
    }

    /// Reads exactly `buffer.count` bytes at `offset`; returns how many were
    /// read before end of file.
    static func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int, path: String) throws -> Int {
        noteDiskIO()
        var done = 0
        while done < buffer.count {
            let n = Glibc.pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if n > 0 { done += n; continue }
            if n == 0 { break }
            if errno != EINTR { throw error("read", path) }
        }
        return done
    }

    /// Writes all of `buffer` at `offset`.
    package static func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int, path: String) throws {
        noteDiskIO()
        var done = 0
        while done < buffer.count {
            let n = Glibc.pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if n > 0 { done += n; continue }
            // Writing nothing for a non-empty buffer would repeat forever.
            if n == 0 { throw error("write", path, errno: EIO) }
            if errno != EINTR { throw error("write", path) }
        }
    }

    /// A small file whole (configuration, /proc), read with `read`;
    /// refused past `limit` bytes.
    package static func contents(of path: String, atMost limit: Int) throws -> [UInt8] {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error("open", path) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw error("read", path) }
            if count == 0 { return bytes }
            guard bytes.count + count <= limit else { throw error("read", path, errno: EFBIG) }
            bytes.append(contentsOf: buffer[..<count])
        }
    }

    /// `fsync`, so data survives a crash.
    static func fsync(_ fd: Int32, path: String) throws {
        noteDiskIO()
        #if DEBUG
        fsyncs.add(1)
        #endif
        guard Glibc.fsync(fd) == 0 else { throw error("fsync", path) }
    }

    /// Opens a directory and fsyncs it, making a rename or create durable.
    static func fsyncDirectory(_ path: String) throws {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { Glibc.close(fd) }
        try fsync(fd, path: path)
    }

    /// The file's size in bytes.
    static func size(_ fd: Int32, path: String) throws -> Int {
        noteDiskIO()
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw error("stat", path) }
        return Int(info.st_size)
    }

    /// `ftruncate`.
    static func truncate(_ fd: Int32, to size: Int, path: String) throws {
        noteDiskIO()
        guard ftruncate(fd, off_t(size)) == 0 else { throw error("truncate", path) }
    }

    /// `rename`, atomic within one file system.
    static func rename(_ from: String, _ to: String) throws {
        noteDiskIO()
        guard Glibc.rename(from, to) == 0 else { throw error("rename", to) }
    }

    /// Gives the file at `existing` the name `new` too; `alreadyExists`
    /// when `new` is taken (never replaced). Atomic within one file system.
    static func link(_ existing: String, _ new: String) throws {
        noteDiskIO()
        guard Glibc.link(existing, new) == 0 else { throw error("create", new) }
    }

    /// Removes a file; a missing file is `notFound`.
    static func unlink(_ path: String) throws {
        noteDiskIO()
        guard Glibc.unlink(path) == 0 else { throw error("delete", path) }
    }

    /// Creates `path` and any missing parents with `mode` (0700 unless
    /// given); each new directory's parent is fsynced so the entry survives
    /// a crash.
    package static func makeDirectories(_ path: String, mode: UInt32 = 0o700) throws {
        // Try the deepest directory first: when it exists (the common case)
        // this costs one system call instead of one per path component.
        if mkdir(path, mode_t(mode)) == 0 {
            try fsyncDirectory(parentDirectory(of: path))
            return
        }
        switch errno {
        case EEXIST:
            return
        case ENOENT:
            let parent = parentDirectory(of: path)
            guard parent != path else { throw error("create directory", path) }
            try makeDirectories(parent, mode: mode)
            if mkdir(path, mode_t(mode)) == 0 {
                try fsyncDirectory(parent)
            } else if errno != EEXIST {
                throw error("create directory", path)
            }
        default:
            throw error("create directory", path)
        }
    }

    /// The directory containing `path`: "/" for "/a", "." for "a".
    static func parentDirectory(of path: String) -> String {
        PathBytes.parent(of: path)
    }

    /// Whether something exists at `path` (not following a final symlink).
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Reads a whole small file.
    static func readFile(_ path: String) throws -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { Glibc.close(fd) }
        let size = try self.size(fd, path: path)
        var bytes = [UInt8](repeating: 0, count: size)
        let read = try bytes.withUnsafeMutableBytes { try pread(fd, into: $0, at: 0, path: path) }
        guard read == size else { throw ProtectionError(.ioFailure, "read \(path): file changed while reading") }
        return bytes
    }

    /// Removes a directory tree (files, subdirectories); missing is fine.
    static func removeTree(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            for entry in try listDirectory(path) { try removeTree(path + "/" + entry) }
            guard rmdir(path) == 0 else { throw error("remove directory", path) }
        } else {
            try unlink(path)
        }
    }

    /// Opens the directory `name` (a path, or a name in the directory
    /// `parent`) without following a symlink: `nil` when it is missing, a
    /// symlink or not a directory.
    static func openDirectory(_ name: String, in parent: Int32 = AT_FDCWD) throws -> Int32? {
        while true {
            let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 { return fd }
            switch errno {
            case EINTR: continue
            case ENOENT, ENOTDIR, ELOOP: return nil
            default: throw error("open", name)
            }
        }
    }

    /// Names in the open directory `fd`, without `.` and `..`; `fd` stays
    /// open.
    static func listDirectory(_ fd: Int32, path: String) throws -> [String] {
        let copy = dup(fd)
        guard copy >= 0 else { throw error("list", path) }
        guard let dir = fdopendir(copy) else {
            let code = errno
            Glibc.close(copy)
            throw error("list", path, errno: code)
        }
        defer { closedir(dir) }
        rewinddir(dir)
        return entryNames(dir)
    }

    /// Removes the regular files directly in the open directory `fd` whose
    /// names `matches` accepts, and makes that durable (fsync of the
    /// directory, when something went). Symlinks and other entries are
    /// left alone (and never followed). Returns how many went.
    @discardableResult
    static func removeFiles(in fd: Int32, path: String, where matches: (String) -> Bool) throws -> Int {
        var removed = 0
        for name in try listDirectory(fd, path: path) where matches(name) {
            var info = stat()
            guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            if unlinkat(fd, name, 0) == 0 {
                removed += 1
            } else if errno != ENOENT {
                throw error("delete", name)
            }
        }
        if removed > 0 { try fsync(fd, path: path) }
        return removed
    }

    /// Removes the regular files directly in `directory` (a configured
    /// path, which may be a symlink) whose names `matches` accepts, and
    /// makes that durable; a missing directory has none. No entry is
    /// followed through a symlink.
    static func removeFiles(in directory: String, where matches: (String) -> Bool) throws {
        let fd: Int32
        do {
            fd = try open(directory, O_RDONLY | O_DIRECTORY)
        } catch let error as ProtectionError where error.code == .notFound {
            return
        }
        defer { Glibc.close(fd) }
        try removeFiles(in: fd, path: directory, where: matches)
    }

    /// Names in a directory, without `.` and `..`.
    static func listDirectory(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw error("list", path) }
        defer { closedir(dir) }
        return entryNames(dir)
    }

    private static func entryNames(_ dir: OpaquePointer) -> [String] {
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
