internal import Glibc

/// Refuses a state directory that someone other than the daemon's user
/// could change: one writable by its group or by others, or owned by
/// another user, would let that user plant links or swap files under the
/// daemon. The same for the directories above it, except that root may own
/// them and a world-writable one needs the sticky bit (as /tmp has).
enum StateDirectoryCheck {
    /// Throws `ioFailure` naming the directory and the fix when `directory`
    /// or a directory above it is unsafe.
    static func verify(_ directory: String) throws {
        let me = geteuid()
        let state = try status(of: directory)
        guard state.st_uid == me else {
            throw refusal(directory, "it is owned by uid \(state.st_uid), not by protd's uid \(me)",
                          fix: "chown \(me) \(directory)")
        }
        guard state.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw refusal(directory, "its group or other users may write to it", fix: "chmod go-w \(directory)")
        }
        var path = resolved(directory)
        while true {
            let parent = PathBytes.parent(of: path)
            guard parent != path else { break }
            path = parent
            let above = try status(of: path)
            guard above.st_uid == 0 || above.st_uid == me else {
                throw refusal(directory, "\(path) above it is owned by uid \(above.st_uid)",
                              fix: "make root or protd's user own \(path)")
            }
            let writableByOthers = above.st_mode & (S_IWGRP | S_IWOTH) != 0
            guard !writableByOthers || above.st_mode & S_ISVTX != 0 else {
                throw refusal(directory, "\(path) above it is writable by its group or others without the sticky bit",
                              fix: "chmod go-w \(path)")
            }
        }
    }

    private static func status(of path: String) throws -> stat {
        var info = stat()
        guard stat(path, &info) == 0 else { throw Posix.error("inspect", path) }
        return info
    }

    /// `path` with symbolic links and relative parts resolved.
    private static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }

    private static func refusal(_ directory: String, _ why: String, fix: String) -> ProtectionError {
        ProtectionError(.ioFailure, "protd refuses the state directory \(directory): \(why); \(fix)")
    }
}
