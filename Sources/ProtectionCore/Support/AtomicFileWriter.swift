internal import Glibc

/// Writes a file so that readers and crashes see either the old or the new
/// content, never a mix: a temporary file in a scratch directory on the same
/// file system, fsync, rename over the target, and (when durable) fsync of
/// the target's directory.
struct AtomicFileWriter {
    /// Where temporary files are made; must be on the target's file system.
    let scratchDirectory: String

    /// Temporary files are named this followed by 32 random hex digits.
    static let temporaryPrefix = "tmp-"

    /// Creates the temporary file for a new version of `path`.
    func begin(target path: String) throws -> AtomicFileTransaction {
        let (fd, temporary) = try createTemporary()
        return AtomicFileTransaction(fd: fd, temporaryPath: temporary, targetPath: path)
    }

    /// Creates an empty temporary file, open read-write: the new version
    /// `begin` renames over its target, or a new file that `publish` gives
    /// its name once it holds something readable.
    func createTemporary() throws -> (fd: Int32, path: String) {
        let temporary = scratchDirectory + "/" + Self.temporaryPrefix + (try SecureRandomName.make())
        return (try Posix.open(temporary, O_RDWR | O_CREAT | O_EXCL, mode: 0o600), temporary)
    }

    /// Makes what was written to the temporary file `temporary` durable,
    /// through a descriptor of its own (the caller's may be closed by then).
    static func flushTemporary(_ temporary: String) throws {
        let fd = try Posix.open(temporary, O_RDONLY | O_NOFOLLOW)
        defer { close(fd) }
        try Posix.fsync(fd, path: temporary)
    }

    /// Names the temporary file `temporary` `path`, which must be free
    /// (`alreadyExists` otherwise: nothing is replaced), then removes the
    /// temporary name.
    static func publish(_ temporary: String, as path: String) throws {
        try Posix.link(temporary, path)
        try? Posix.unlink(temporary)
    }

    /// Removes the temporary files that writes interrupted by a crash
    /// (or `kill -9`) left in the scratch directory. Only for when no write
    /// can be in progress there: at start, or under the lock writers take.
    func removeLeftovers() throws {
        try Posix.removeFiles(in: scratchDirectory) { SecureRandomName.matches($0, prefix: Self.temporaryPrefix) }
    }

    /// Writes `bytes` atomically to `path`.
    func write(_ bytes: [UInt8], to path: String, durable: Bool) throws {
        let transaction = try begin(target: path)
        defer { transaction.abort() }
        try bytes.withUnsafeBytes { try Posix.pwrite(transaction.fd, $0, at: 0, path: transaction.temporaryPath) }
        try transaction.commit(durable: durable)
    }
}

/// One atomic replacement in progress: write through `fd`, then `commit`
/// or `abort`. Abort (also on deinit) removes the temporary file and
/// leaves the target untouched.
final class AtomicFileTransaction {
    /// The temporary file, open for writing.
    let fd: Int32
    /// Where the temporary file is.
    let temporaryPath: String
    /// The file it will replace.
    let targetPath: String
    private var finished = false
    /// Whether the temporary file was renamed over the target.
    private(set) var renamed = false

    fileprivate init(fd: Int32, temporaryPath: String, targetPath: String) {
        self.fd = fd
        self.temporaryPath = temporaryPath
        self.targetPath = targetPath
    }

    /// Fsyncs the data, then renames the temporary file over the target, so
    /// a crash leaves the old content or the new, never a name on data that
    /// did not reach the disk; with `durable`, the directory is fsynced
    /// after, so the rename itself survives a crash too. `beforeRename`
    /// runs right before the rename; if it throws, nothing is renamed.
    /// After a failure, `renamed` says whether the new content is in place
    /// anyway (only the directory's fsync failed).
    func commit(durable: Bool, beforeRename: () throws -> Void = {}) throws {
        precondition(!finished, "an atomic write is committed or aborted once")
        try Posix.fsync(fd, path: temporaryPath)
        try beforeRename()
        try Posix.rename(temporaryPath, targetPath)
        renamed = true
        finished = true
        close(fd)
        if durable { try Posix.fsyncDirectory(Posix.parentDirectory(of: targetPath)) }
    }

    /// Drops the temporary file. Harmless after `commit`.
    func abort() {
        guard !finished else { return }
        finished = true
        close(fd)
        unlink(temporaryPath)
    }

    deinit { abort() }
}
