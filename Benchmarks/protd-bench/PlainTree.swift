import Foundation
import Glibc
import ProtectionTestSupport

/// A plain directory tree of the names workload's shape, and the same
/// operations on it with system calls: the floor for protd's sealed names
/// on the same file system.
struct PlainTree {
    /// The tree's root.
    let root: String

    /// Creates `names` (relative paths whose directories are `directories`)
    /// with `content` each, on every core; returns the seconds it took.
    static func create(root: String, directories: [String], names: [String], content: [UInt8]) throws -> (PlainTree, Double) {
        for directory in [root] + directories.map({ root + "/" + $0 }) {
            guard mkdir(directory, 0o700) == 0 else { throw BenchFailure("cannot make \(directory): errno \(errno)") }
        }
        let threads = ProcessInfo.processInfo.activeProcessorCount
        let failures = Failures()
        let start = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in stride(from: thread, to: names.count, by: threads) {
                let fd = open(root + "/" + names[index], O_WRONLY | O_CREAT | O_EXCL, 0o600)
                let written = content.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if fd < 0 || written != content.count { failures.note(names[index]) }
                close(fd)
            }
        }
        let elapsed = seconds(since: start)
        if let failed = failures.first { throw BenchFailure("cannot create \(root)/\(failed)") }
        return (PlainTree(root: root), elapsed)
    }

    /// stat(2) of each of `names`; false when one is missing.
    func statEach(_ names: [String]) -> Bool {
        var info = stat()
        for name in names where stat(root + "/" + name, &info) != 0 { return false }
        return true
    }

    /// open(2) and close(2) of each of `names`; false when one fails.
    func openAndClose(_ names: [String]) -> Bool {
        for name in names {
            let fd = open(root + "/" + name, O_RDONLY)
            guard fd >= 0 else { return false }
            close(fd)
        }
        return true
    }

    /// The regular files in `directory` (relative to the root), each
    /// readdir entry stat'ed, as a listing with attributes needs.
    func list(_ directory: String) -> Int {
        Self.walk(directory.isEmpty ? root : root + "/" + directory, into: false)
    }

    /// The regular files under every entry of the root whose name starts
    /// with `prefix`: the top directory read whole, the matching
    /// directories read with a stat of each entry.
    func list(topPrefix prefix: String) -> Int {
        guard let top = opendir(root) else { return -1 }
        defer { closedir(top) }
        var files = 0
        while let entry = readdir(top) {
            let name = Self.name(of: entry)
            guard name != ".", name != "..", name.hasPrefix(prefix) else { continue }
            files += Self.walk(root + "/" + name, into: false)
        }
        return files
    }

    /// Every regular file under the root: a walk of the whole tree with a
    /// stat of each entry.
    func listAll() -> Int { Self.walk(root, into: true) }

    func remove() { try? FileManager.default.removeItem(atPath: root) }

    /// Counts the regular files in `path`, fstatat(2) on every entry,
    /// descending into directories when `into`.
    private static func walk(_ path: String, into descend: Bool) -> Int {
        guard let directory = opendir(path) else { return -1 }
        defer { closedir(directory) }
        let fd = dirfd(directory)
        var files = 0
        var info = stat()
        while let entry = readdir(directory) {
            let name = name(of: entry)
            guard name != ".", name != "..", fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if (info.st_mode & S_IFMT) == S_IFREG {
                files += 1
            } else if (info.st_mode & S_IFMT) == S_IFDIR, descend {
                files += walk(path + "/" + name, into: true)
            }
        }
        return files
    }

    private static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
        }
    }
}

/// The first name a concurrent loop could not create.
private final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var names: [String] = []

    func note(_ name: String) { lock.withLock { names.append(name) } }
    var first: String? { lock.withLock { names.first } }
}
