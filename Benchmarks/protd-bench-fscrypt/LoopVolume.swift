import CFscrypt
import Foundation
import Glibc
import ProtectionTestSupport

/// An ext4 with the encrypt feature on a loop device, mounted on /mnt in
/// this process's own mount namespace: nobody else sees it, and when the
/// process ends, however it ends, the mount, the loop device and the
/// image (unlinked before it is formatted) go with it.
struct LoopVolume {
    /// Where the ext4 is mounted, in this process's namespace only.
    let mountPoint = "/mnt"

    /// Makes, formats and mounts an image with room for a `sizeMiB` file in `directory`.
    init(directory: String, sizeMiB: Int) throws {
        guard geteuid() == 0 else { throw Unavailable("needs root, to loop-mount an ext4") }
        // Only the calling thread moves to the new namespace: this one, which
        // also starts mkfs and mount below.
        guard protd_unshare_mounts() == 0 else {
            throw Unavailable("cannot make a private mount namespace of its own", errno: errno)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: mountPoint, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw Unavailable("no \(mountPoint) directory to mount the ext4 on")
        }
        let image = try Self.anonymousImage(in: directory, bytes: off_t(sizeMiB + sizeMiB / 4 + 64) << 20)
        defer { close(image) }
        // The tools reach the unlinked image through this process's descriptor.
        let path = "/proc/\(getpid())/fd/\(image)"
        // Inode tables and journal zeroed now, not by ext4lazyinit during the timed writes.
        try Self.run("mkfs.ext4", ["-q", "-F", "-O", "encrypt", "-E", "lazy_itable_init=0,lazy_journal_init=0", path],
                     package: "e2fsprogs")
        try Self.run("mount", ["-o", "loop", path, mountPoint], package: "mount")
    }

    /// A sparse file of `bytes` in `directory`, unlinked at once: nothing is
    /// left behind however this process ends, and the space is freed once
    /// the descriptor and the loop device let go of it.
    private static func anonymousImage(in directory: String, bytes: off_t) throws -> Int32 {
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY)
        guard directoryFD >= 0 else { throw Unavailable("cannot open \(directory)", errno: errno) }
        defer { close(directoryFD) }
        let name = "protd-bench-fscrypt-\(getpid()).img"
        let fd = openat(directoryFD, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Unavailable("cannot create \(directory)/\(name)", errno: errno) }
        unlinkat(directoryFD, name, 0)
        guard ftruncate(fd, bytes) == 0 else {
            let code = errno
            close(fd)
            throw Unavailable("cannot size an image of \(bytes >> 20) MiB in \(directory)", errno: code)
        }
        return fd
    }

    /// A new directory with an fscrypt v2 policy (AES-256-XTS contents)
    /// under a random key added to the file system.
    func encryptedDirectory() throws -> String {
        let path = mountPoint + "/encrypted"
        guard mkdir(path, 0o700) == 0 else { throw Unavailable("mkdir \(path)", errno: errno) }
        let root = open(mountPoint, O_RDONLY | O_DIRECTORY)
        let directory = open(path, O_RDONLY | O_DIRECTORY)
        defer {
            close(root)
            close(directory)
        }
        var generator = SystemRandomNumberGenerator()
        var key = (0..<64).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        defer { key.withUnsafeMutableBytes { bytes in bytes.baseAddress.map { _ = memset($0, 0, bytes.count) } } }
        var identifier = [UInt8](repeating: 0, count: 16)
        guard protd_fscrypt_add_key(root, key, &identifier) == 0 else {
            throw Unavailable("the kernel refused an fscrypt key (FS_IOC_ADD_ENCRYPTION_KEY)", errno: errno)
        }
        guard protd_fscrypt_set_policy(directory, identifier) == 0 else {
            throw Unavailable("the kernel refused an fscrypt policy (FS_IOC_SET_ENCRYPTION_POLICY)", errno: errno)
        }
        return path
    }

    /// Runs `tool` (found on PATH or in the sbin directories) to the end;
    /// throws with its output when it is missing or fails.
    private static func run(_ tool: String, _ arguments: [String], package: String) throws {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
            + ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        guard let executable = directories.map({ "\($0)/\(tool)" }).first(where: FileManager.default.isExecutableFile)
        else { throw Unavailable("\(tool) is not installed (apt-get install \(package))") }
        let result = try CommandRunner.run(executable, arguments)
        guard result.status == 0 else {
            throw Unavailable("\(tool) \(arguments.joined(separator: " ")) failed: "
                              + (result.stderr + result.stdout).trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}
