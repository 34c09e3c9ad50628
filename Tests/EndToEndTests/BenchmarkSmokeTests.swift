import Foundation
import ProtectionTestSupport
import Testing

/// The benchmark must keep working; how fast it is is for `make bench`.
@Suite("Benchmark quick mode")
struct BenchmarkSmokeTests {
    /// git on PATH, where the bench looks for it.
    static var git: String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .map { "\($0)/git" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test("protd-bench --quick runs every workload to the end and writes its reports")
    func quickBenchmarkCompletes() throws {
        let directory = try TemporaryDirectory("b")  // short: the daemon's socket goes inside it
        defer { directory.remove() }
        let markdown = directory.appending("BENCHMARKS.md")
        let json = directory.appending("bench.json")
        let result = try CommandRunner.run(CommandRunner.builtProduct("protd-bench"),
                                           ["--quick", "--dir", directory.path, "--markdown", markdown, "--json", json])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("targets:"))
        for workload in ["large file", "small files", "lock fan-out", "passwd", "cold start", "open handles"] {
            #expect(result.stdout.contains(workload), "no \(workload) row")
        }
        #expect(FileManager.default.fileExists(atPath: markdown))
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
        #expect((document?["rows"] as? [Any])?.isEmpty == false)
        // Built from a git checkout that git reads here, the report names its commit.
        let bench = URL(fileURLWithPath: CommandRunner.builtProduct("protd-bench")).resolvingSymlinksInPath()
        let checkout = bench.deletingLastPathComponent().path.components(separatedBy: "/.build").first ?? ""
        if let git = Self.git, let described = try? CommandRunner.run(git, ["-C", checkout, "describe", "--always", "--dirty"]),
           described.status == 0 {
            let revision = described.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let report = try String(contentsOfFile: markdown, encoding: .utf8)
            #expect(report.contains("| protd source | \(revision) |"), "\(report.prefix(1_500))")
        }
    }
}
