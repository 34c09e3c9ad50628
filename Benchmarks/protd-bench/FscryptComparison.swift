import Foundation
import ProtectionTestSupport

/// Kernel fscrypt beside protd's large file, where this machine allows it:
/// `protd-bench-fscrypt` (root) times an ext4 with the encrypt feature on a
/// loop device, in an encrypted directory and in a plain one, in a mount
/// namespace of its own. Reported without a target: the issue sets none.
struct FscryptComparison {
    let options: BenchOptions
    let report: Report

    /// The helper executable.
    static let helperName = "protd-bench-fscrypt"

    /// Runs the helper and reports its figures against protd's medians, or
    /// records why it could not run.
    func run(protdWrite: Double, protdRead: Double) throws {
        guard geteuid() == 0 else {
            report.skip("kernel fscrypt: needs root, to loop-mount an ext4")
            return
        }
        let helper = CommandRunner.builtProduct(Self.helperName)
        guard FileManager.default.isExecutableFile(atPath: helper) else {
            report.skip("kernel fscrypt: \(helper) is missing; build it with `swift build -c release --product protd-bench`")
            return
        }
        let result = try BenchEnvironment.run(helper, ["--dir", options.dir, "--size-mib", "\(options.sizeMiB)",
                                                       "--repetitions", "\(options.repetitions)"])
        var rates: [String: [Double]] = [:]
        for line in result.stdout.split(separator: "\n") {
            if line.hasPrefix("unavailable ") {
                report.skip("kernel fscrypt: \(line.dropFirst("unavailable ".count))")
                return
            }
            let words = line.split(separator: " ")
            guard words.count == 3, let rate = Double(words[2]) else { continue }
            rates["\(words[0]) \(words[1])", default: []].append(rate)
        }
        let expected = ["encrypted write", "encrypted read", "plain write", "plain read"]
        guard result.status == 0, expected.allSatisfy({ rates[$0]?.count == options.repetitions }) else {
            report.skip("kernel fscrypt: \(Self.helperName) failed (exit \(result.status)): "
                        + (result.stderr + result.stdout).trimmingCharacters(in: .whitespacesAndNewlines))
            return
        }
        let label = "large file \(options.sizeMiB) MiB"
        let driver = Self.kernelDriver(for: "xts(aes)") ?? "unknown"
        let write = Sample(values: rates["encrypted write"]!)
        let read = Sample(values: rates["encrypted read"]!)
        report.add(Row(workload: label, measure: "fscrypt write (ext4 on a loop device, fsync)", unit: "MiB/s", sample: write,
                       note: "kernel fscrypt, v2 policy, AES-256-XTS contents, in an ext4 image on \(options.dir) attached "
                           + "to a loop device; fsync included, because fscrypt encrypts when the pages are written "
                           + "back; the kernel's xts(aes) driver here: \(driver)"))
        report.add(Row(workload: label, measure: "fscrypt read (ext4 on a loop device, cold)", unit: "MiB/s", sample: read,
                       note: "after POSIX_FADV_DONTNEED, so the kernel reads the blocks back through the loop device "
                           + "(from the image's own cached pages when \(options.dir) is a tmpfs) and decrypts them; "
                           + "a warm read comes from the page cache, already decrypted"))
        report.add(Row(workload: label, measure: "plain ext4 on the same loop device, write (fsync)", unit: "MiB/s",
                       sample: Sample(values: rates["plain write"]!),
                       note: "the same file in an unencrypted directory beside it: what ext4 and the loop device cost"))
        report.add(Row(workload: label, measure: "plain ext4 on the same loop device, read (cold)", unit: "MiB/s",
                       sample: Sample(values: rates["plain read"]!)))
        report.add(Row(workload: label, measure: "protd write / fscrypt write", unit: "x",
                       sample: Sample(values: [protdWrite / write.median]),
                       note: "no target; protd's write is not fsync'd, fscrypt's must be (it encrypts on writeback)"))
        report.add(Row(workload: label, measure: "protd read / fscrypt read", unit: "x",
                       sample: Sample(values: [protdRead / read.median]), note: "no target"))
    }

    /// The driver the kernel picked for the crypto algorithm `name` (the
    /// highest priority one in /proc/crypto), or nil when it has none yet.
    static func kernelDriver(for name: String) -> String? {
        let text = (try? String(contentsOfFile: "/proc/crypto", encoding: .utf8)) ?? ""
        let entries = text.components(separatedBy: "\n\n").map { block in
            Dictionary(block.split(separator: "\n").compactMap { line -> (String, String)? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2 else { return nil }
                return (parts[0].trimmingCharacters(in: .whitespaces), parts[1].trimmingCharacters(in: .whitespaces))
            }, uniquingKeysWith: { first, _ in first })
        }
        return entries.filter { $0["name"] == name }
            .max { Int($0["priority"] ?? "") ?? 0 < Int($1["priority"] ?? "") ?? 0 }?["driver"]
    }
}
