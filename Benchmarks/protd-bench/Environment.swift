import Foundation
import Glibc
import ProtectionTestSupport
import Sodium

/// The machine and the peer tools, and small process helpers.
enum BenchEnvironment {
    /// Raises the open-file limit to the hard limit (1,000 subscribers and
    /// 10,000 handles need it; the daemon inherits it).
    static func raiseFileLimit() {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// Path of `tool` on PATH, or nil.
    static func which(_ tool: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// Runs a command, returning its exit status and output.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], input: [UInt8]? = nil) throws -> CommandResult {
        try CommandRunner.run(executable, arguments, input: input)
    }

    /// Facts about this machine for the report.
    static func describe(options: BenchOptions) -> [String: String] {
        var facts: [String: String] = [:]
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        facts["cpu"] = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) } ?? "?"
        facts["cores"] = "\(ProcessInfo.processInfo.activeProcessorCount)"
        facts["memory"] = "\(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
        facts["aes-ni"] = cpuinfo.contains(" aes ") ? "yes" : "no"
        facts["storage"] = options.dir
        facts["storage for fsync rows"] = options.diskDir
        facts["date"] = ISO8601DateFormatter().string(from: Date())
        facts["os"] = ((try? String(contentsOfFile: "/etc/debian_version", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        facts["libsodium"] = SodiumRuntime.version
        if let gocryptfs = which("gocryptfs") {
            facts["gocryptfs"] = (try? run(gocryptfs, ["-version"]).stdout.split(separator: "\n").first.map(String.init)) ?? "?"
        }
        facts["kernel"] = (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
        if let age = which("age") { facts["age"] = (try? run(age, ["--version"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? "?" }
        if let source = sourceRevision() { facts["protd source"] = source }
        facts["settings"] = "size \(options.sizeMiB) MiB, \(options.files) small files, \(options.names) names, "
            + "\(options.repetitions) repetitions, "
            + "\(options.subscribers) subscribers, \(options.handles) handles"
        return facts
    }

    /// The commit of the checkout this bench was built from (`git describe
    /// --always --dirty`), found from the executable's path; nil outside a
    /// git checkout or without git.
    static func sourceRevision() -> String? {
        guard let git = which("git") else { return nil }
        var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
                guard let result = try? run(git, ["-C", directory.path, "describe", "--always", "--dirty"]),
                      result.status == 0 else { return nil }
                return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            directory.deleteLastPathComponent()
        }
        return nil
    }
}
