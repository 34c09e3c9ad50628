internal import Glibc

/// Checks the key bag file before it is loaded, so it is never replaced or
/// trusted without a word: a missing key bag is made afresh only when the
/// store holds no file (new class keys would leave every class A, B and C
/// file unreadable for good); one open to other users is set to 0600 with a
/// warning; one owned by another user, or that is not a regular file, is
/// refused.
enum KeyBagFileCheck {
    /// Throws `keyBagCorrupt` for a missing key bag beside stored files,
    /// `ioFailure` for a foreign or odd file; fixes the mode and tells
    /// `notify` when others could read or write it.
    static func verify(keyBag path: String, store root: String, notify: (StoreNotice) -> Void) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            guard errno == ENOENT else { throw Posix.error("inspect", path) }
            if try FileStore.holdsAnyFile(root: root) {
                throw ProtectionError(
                    .keyBagCorrupt,
                    "the key bag \(path) is missing but \(root) holds files, whose class keys were in it; "
                        + "restore the key bag from a backup, or move \(root) away to start a new store "
                        + "without them")
            }
            return
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw ProtectionError(.ioFailure, "the key bag \(path) is not a regular file; restore it from a backup")
        }
        let me = geteuid()
        guard info.st_uid == me else {
            throw ProtectionError(.ioFailure, "the key bag \(path) is owned by uid \(info.st_uid), not by protd's uid "
                                  + "\(me), so someone else may have replaced it; check it, then chown \(me) \(path)")
        }
        let mode = UInt32(info.st_mode) & 0o7777
        if mode & 0o077 != 0 {
            guard chmod(path, 0o600) == 0 else { throw Posix.error("set the mode of", path) }
            notify(.keyBagModeFixed(path: path, mode: mode))
        }
    }
}
