internal import Foundation

/// Which file system a path is on, read from /proc/mounts: for tests that
/// depend on it, without asking the code under test.
public enum MountTable {
    /// The type (`tmpfs`, `ext4`, ...) of the mount that holds `path`: the
    /// longest mount point that is `path` or one of its parents.
    public static func type(of path: String) -> String? {
        guard let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return nil }
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var best: (point: String, type: String)?
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count >= 3 else { continue }
            let point = fields[1]
            let holds = resolved == point || resolved.hasPrefix(point == "/" ? "/" : point + "/")
            if holds && point.count >= (best?.point.count ?? 0) { best = (point, fields[2]) }
        }
        return best?.type
    }

    /// Whether `path` is on a file system kept in memory (tmpfs, ramfs).
    public static func isInMemory(_ path: String) -> Bool {
        ["tmpfs", "ramfs"].contains(type(of: path))
    }
}
