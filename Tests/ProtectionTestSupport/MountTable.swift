internal import Foundation

/// Which file system a path is on, read from /proc/mounts: for tests that
/// depend on it, without asking the code under test.
public enum MountTable {
    /// The mount that holds a path: its file-system type (`tmpfs`,
    /// `ext4`, ...) and options (`rw`, `noexec`, ...).
    public struct Mount: Sendable {
        public let type: String
        public let options: [String]
    }

    /// The mount that holds `path`: the longest mount point that is `path`
    /// or one of its parents.
    public static func mount(of path: String) -> Mount? {
        guard let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return nil }
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var best: (point: String, mount: Mount)?
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ").map { unescaped(String($0)) }
            guard fields.count >= 4 else { continue }
            let point = fields[1]
            let holds = resolved == point || resolved.hasPrefix(point == "/" ? "/" : point + "/")
            if holds && point.count >= (best?.point.count ?? 0) {
                best = (point, Mount(type: fields[2], options: fields[3].split(separator: ",").map(String.init)))
            }
        }
        return best?.mount
    }

    /// The file-system type of the mount that holds `path`.
    public static func type(of path: String) -> String? { mount(of: path)?.type }

    /// Whether `path` is on a file system kept in memory, which `fstatfs`
    /// reports as tmpfs or ramfs.
    public static func isInMemory(_ path: String) -> Bool {
        ["tmpfs", "ramfs", "devtmpfs", "rootfs"].contains(type(of: path))
    }

    /// A /proc/mounts field with its octal escapes (`\040` for a space,
    /// `\011`, `\012`, `\134`) decoded.
    public static func unescaped(_ field: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
               let code = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(code)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
