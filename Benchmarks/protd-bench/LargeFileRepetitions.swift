import DataProtection
import Foundation
import Glibc
import ProtectionTestSupport

/// A large-file measurement taken one repetition at a time, so that
/// several can take turns (`TakingTurns`).
protocol LargeFileRepetition: AnyObject {
    /// Runs one repetition, its untimed preparation included.
    func once() async throws
}

/// Runs measurements in rounds of one repetition each, every round starting
/// one measurement further on. The speed of this VM drifts by tens of
/// percent over minutes; measured one block after another, a target's
/// figure and its baseline could each catch a different minute, and their
/// ratio with them. Taking turns lets any drift weigh on all alike.
enum TakingTurns {
    static func run(_ measurements: [any LargeFileRepetition], rounds: Int) async throws {
        for round in 0..<rounds {
            for position in measurements.indices {
                try await measurements[(position + round) % measurements.count].once()
            }
        }
    }
}

/// protd's write then read of one large file through `client`: seconds for
/// each, the CPU each side spent in them and the daemon's highest RSS
/// during each.
final class ProtdLargeFile: LargeFileRepetition {
    private let daemon: DaemonProcess
    private let file: ProtectedFile
    private let content: [UInt8]
    private let chunks: Int
    private let durable: Bool
    private let prepare: () throws -> Void
    private(set) var writeSeconds: [Double] = []
    private(set) var readSeconds: [Double] = []
    /// The daemon's highest RSS during each write and each read.
    private(set) var peaks: [Double] = []
    private(set) var writeCPU: CPUAccount
    private(set) var readCPU: CPUAccount

    /// `prepare` runs, untimed, before each write; `durable` is the write's
    /// (the client's default is true).
    init(daemon: DaemonProcess, client: DataProtectionClient, content: [UInt8], chunks: Int, durable: Bool = false,
         prepare: @escaping () throws -> Void) {
        self.daemon = daemon
        self.content = content
        self.chunks = chunks
        self.durable = durable
        self.prepare = prepare
        file = client.file("large")
        writeCPU = CPUAccount(daemon: daemon.pid)
        readCPU = CPUAccount(daemon: daemon.pid)
    }

    func once() async throws {
        // Each write makes the file anew, as the floor's and the peers' do
        // (they unlink or truncate first): replacing it would keep the old
        // copy until the new one commits, so it would need fresh memory for
        // all of it, which costs several times more on this kind of VM.
        try await deleteIfPresent()
        try prepare()
        let pid = daemon.pid
        writeSeconds.append(try await writeCPU.count {
            try await Stopwatch.time {
                peaks.append(try await Memory.peakResidentMiB(pid: pid) {
                    try await file.write(contentsOf: RepeatedChunks(chunk: content, count: chunks),
                                         protection: .completeUntilFirstUserAuthentication, durable: durable)
                })
            }
        })
        let bytes = content.count * chunks
        readSeconds.append(try await readCPU.count {
            try await Stopwatch.time {
                peaks.append(try await Memory.peakResidentMiB(pid: pid) {
                    var total = 0
                    for try await piece in file.readChunks() { total += piece.count }
                    precondition(total == bytes, "read \(total) of \(bytes) bytes")
                })
            }
        })
    }

    /// Deletes the file unless it does not exist.
    func deleteIfPresent() async throws {
        do {
            try await file.delete()
        } catch .notFound {
        }
    }
}

/// Plain 1 MiB writes and reads of a file at `path`: a new file (as protd
/// writes one), then with `overwrite` the same file written again in place
/// (its pages already allocated), then a read. `remove()` (or release)
/// deletes the file.
final class PlainLargeFile: LargeFileRepetition {
    private let path: String
    private let content: [UInt8]
    private let chunks: Int
    private let timesOverwrite: Bool
    private let durable: Bool
    private let prepare: () throws -> Void
    private var buffer: [UInt8]
    private(set) var writeSeconds: [Double] = []
    private(set) var overwriteSeconds: [Double] = []
    private(set) var readSeconds: [Double] = []

    /// `prepare` runs, untimed, before each new file's write; with
    /// `durable` each write ends with fsync.
    init(path: String, content: [UInt8], chunks: Int, overwrite: Bool = false, durable: Bool = false,
         prepare: @escaping () throws -> Void) {
        self.path = path
        self.content = content
        self.chunks = chunks
        timesOverwrite = overwrite
        self.durable = durable
        self.prepare = prepare
        buffer = [UInt8](repeating: 0, count: content.count)
    }

    deinit { remove() }

    /// Deletes the file, so that it holds no memory while other work runs.
    func remove() { unlink(path) }

    func once() throws {
        unlink(path)
        try prepare()
        writeSeconds.append(timedWrite(flags: O_CREAT | O_TRUNC))
        if timesOverwrite { overwriteSeconds.append(timedWrite(flags: 0)) }
        let start = ContinuousClock.now
        let fd = open(path, O_RDONLY)
        while buffer.withUnsafeMutableBytes({ Glibc.read(fd, $0.baseAddress, $0.count) }) > 0 {}
        close(fd)
        readSeconds.append(seconds(since: start))
    }

    /// Seconds to write the whole content to `path` opened with `flags`.
    private func timedWrite(flags: Int32) -> Double {
        let start = ContinuousClock.now
        let fd = open(path, O_WRONLY | flags, 0o600)
        for _ in 0..<chunks { _ = content.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
        if durable { fsync(fd) }
        close(fd)
        return seconds(since: start)
    }
}

/// age encrypting (write) and decrypting (read) the large file with an
/// X25519 recipient. `remove()` (or release) deletes its files.
final class AgeLargeFile: LargeFileRepetition {
    private let age: String
    private let base: String
    private let recipient: String
    private let prepare: () throws -> Void
    private(set) var encryptSeconds: [Double] = []
    private(set) var decryptSeconds: [Double] = []

    /// Makes a key and the plaintext file in `directory`; nil, with the
    /// reason reported as a skip, when age cannot run here.
    static func make(in directory: String, content: [UInt8], chunks: Int, report: Report,
                     prepare: @escaping () throws -> Void) throws -> AgeLargeFile? {
        guard let age = BenchEnvironment.which("age"), let keygen = BenchEnvironment.which("age-keygen") else {
            report.skip("age: not installed (apt-get install age)")
            return nil
        }
        let base = directory + "/protd-bench-age-\(getpid())"
        unlink("\(base).key")
        let generated = try BenchEnvironment.run(keygen, ["-o", "\(base).key"])
        guard let recipient = (generated.stderr + generated.stdout).split(separator: " ").last?
            .trimmingCharacters(in: .whitespacesAndNewlines), recipient.hasPrefix("age1") else {
            unlink("\(base).key")
            report.skip("age: age-keygen gave no recipient")
            return nil
        }
        let made = AgeLargeFile(age: age, base: base, recipient: recipient, prepare: prepare)
        let fd = open("\(base).in", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for _ in 0..<chunks { _ = content.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
        close(fd)
        return made
    }

    private init(age: String, base: String, recipient: String, prepare: @escaping () throws -> Void) {
        self.age = age
        self.base = base
        self.recipient = recipient
        self.prepare = prepare
    }

    deinit { remove() }

    /// Deletes its key, input and outputs.
    func remove() { for suffix in ["key", "in", "enc", "out"] { unlink("\(base).\(suffix)") } }

    func once() throws {
        unlink("\(base).enc")
        try prepare()
        let start = ContinuousClock.now
        try BenchEnvironment.run(age, ["-r", recipient, "-o", "\(base).enc", "\(base).in"])
        encryptSeconds.append(seconds(since: start))
        unlink("\(base).out")
        let readStart = ContinuousClock.now
        try BenchEnvironment.run(age, ["-d", "-i", "\(base).key", "-o", "\(base).out", "\(base).enc"])
        decryptSeconds.append(seconds(since: readStart))
    }
}
