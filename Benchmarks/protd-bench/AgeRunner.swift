import Foundation
import Glibc
import ProtectionTestSupport

/// age with an X25519 recipient over a file of the workload's bytes: one
/// encrypt and one decrypt per round, so its rounds can alternate with
/// protd's.
struct AgeRunner {
    private let age: String
    private let recipient: String
    private let base: String
    private let mebibytes: Double

    /// Makes a key and the input file in `directory`, or records in
    /// `report` why age cannot run and returns nil.
    static func prepare(in directory: String, content: [UInt8], chunks: Int, report: Report) throws -> AgeRunner? {
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
        let fd = open("\(base).in", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for _ in 0..<chunks { _ = content.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
        close(fd)
        return AgeRunner(age: age, recipient: recipient, base: base,
                         mebibytes: Double(content.count * chunks) / Double(1 << 20))
    }

    /// MiB/s of one encrypt, then of one decrypt of what it wrote.
    func round() throws -> (encrypt: Double, decrypt: Double) {
        let start = ContinuousClock.now
        try BenchEnvironment.run(age, ["-r", recipient, "-o", "\(base).enc", "\(base).in"])
        let encrypt = mebibytes / seconds(since: start)
        unlink("\(base).out")
        let readStart = ContinuousClock.now
        try BenchEnvironment.run(age, ["-d", "-i", "\(base).key", "-o", "\(base).out", "\(base).enc"])
        return (encrypt, mebibytes / seconds(since: readStart))
    }

    /// Deletes the key and the files.
    func remove() {
        for suffix in ["key", "in", "enc", "out"] { unlink("\(base).\(suffix)") }
    }
}
