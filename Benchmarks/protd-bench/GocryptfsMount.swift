import Foundation
import Glibc
import ProtectionTestSupport

/// A gocryptfs file system mounted for the comparison (FUSE), or the
/// reason it cannot be.
final class GocryptfsMount {
    let mountPoint: String
    private let root: String

    private init(root: String) {
        self.root = root
        mountPoint = root + "/plain"
    }

    /// Initialises and mounts a gocryptfs in `directory`; throws a reason
    /// when gocryptfs, fusermount3 or /dev/fuse is missing or mounting fails.
    static func mount(in directory: String) throws -> GocryptfsMount {
        guard let gocryptfs = BenchEnvironment.which("gocryptfs"), BenchEnvironment.which("fusermount3") != nil else {
            throw BenchFailure("gocryptfs: not installed (apt-get install gocryptfs fuse3)")
        }
        guard FileManager.default.fileExists(atPath: "/dev/fuse") else { throw BenchFailure("gocryptfs: no /dev/fuse here") }
        let mount = GocryptfsMount(root: directory + "/protd-bench-gocryptfs-\(getpid())")
        let cipher = mount.root + "/cipher"
        let passfile = mount.root + "/pass"
        try FileManager.default.createDirectory(atPath: cipher, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mount.mountPoint, withIntermediateDirectories: true)
        try "bench-passphrase\n".write(toFile: passfile, atomically: true, encoding: .utf8)
        let initialised = try BenchEnvironment.run(gocryptfs, ["-init", "-q", "-passfile", passfile, cipher])
        guard initialised.status == 0 else { throw BenchFailure("gocryptfs -init failed: \(initialised.stderr)") }
        // The mount leaves a background process holding its output open, so
        // it must not write to a pipe we wait on: log to a file instead.
        let log = mount.root + "/mount.log"
        let mounting = try SpawnedProcess([gocryptfs, "-q", "-nosyslog", "-passfile", passfile, cipher, mount.mountPoint],
                                          logPath: log)
        guard mounting.wait() == 0 else {
            let reason = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            mount.unmount()
            throw BenchFailure("gocryptfs mount failed: \(reason)")
        }
        return mount
    }

    /// Mounts one, or records in `report` why it cannot and returns nil.
    static func mountOrSkip(in directory: String, report: Report, what: String) -> GocryptfsMount? {
        do {
            return try mount(in: directory)
        } catch {
            report.skip("\(what): \(error)")
            return nil
        }
    }

    /// Unmounts and removes everything.
    func unmount() {
        if let fusermount = BenchEnvironment.which("fusermount3") {
            _ = try? BenchEnvironment.run(fusermount, ["-u", mountPoint])
        }
        try? FileManager.default.removeItem(atPath: root)
    }
}
