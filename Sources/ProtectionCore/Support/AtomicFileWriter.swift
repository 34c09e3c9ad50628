internal import Glibc

/// Writes a file so that readers and crashes see either the old or the new
/// content, never a mix: a temporary file in a scratch directory on the same
/// file system, optional fsync, rename over the target, fsync of the
/// target's directory.
struct AtomicFileWriter {
    /// Where temporary files are made; must be on the target's file system.
    let scratchDirectory: String

    /// Creates a temporary file, lets `fill` write it through its descriptor,
    /// then renames it to `path`. When `durable` the data and the rename are
    /// fsynced. On any failure the temporary file is removed and the old
    /// content at `path` is untouched.
    func write(to path: String, durable: Bool, fill: (Int32, String) throws -> Void) throws {
        let suffix = (try? SecureRandomName.make()) ?? String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let temporary = scratchDirectory + "/tmp-" + suffix
        let fd = try Posix.open(temporary, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        var renamed = false
        defer {
            Glibc.close(fd)
            if !renamed { Glibc.unlink(temporary) }
        }
        try fill(fd, temporary)
        if durable { try Posix.fsync(fd, path: temporary) }
        try Posix.rename(temporary, path)
        renamed = true
        if durable { try Posix.fsyncDirectory(Self.parent(of: path)) }
    }

    /// Writes `bytes` atomically to `path`.
    func write(_ bytes: [UInt8], to path: String, durable: Bool) throws {
        try write(to: path, durable: durable) { fd, temporary in
            try bytes.withUnsafeBytes { try Posix.pwrite(fd, $0, at: 0, path: temporary) }
        }
    }

    /// The directory part of `path`.
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
