import Foundation
import ProtectionTestSupport

/// Several measurements of one figure: median with min and max.
struct Sample: Codable {
    var values: [Double]

    var median: Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
    var min: Double { values.min() ?? .nan }
    var max: Double { values.max() ?? .nan }
}

/// Wall-clock timing.
enum Stopwatch {
    /// Seconds `body` took.
    static func time(_ body: () async throws -> Void) async rethrows -> Double {
        let start = ContinuousClock.now
        try await body()
        return seconds(since: start)
    }

    /// `repetitions` timings of `body`, each after an untimed `setup`.
    static func sample(_ repetitions: Int, setup: () async throws -> Void = {},
                       _ body: () async throws -> Void) async rethrows -> Sample {
        var values: [Double] = []
        for _ in 0..<repetitions {
            try await setup()
            values.append(try await time(body))
        }
        return Sample(values: values)
    }
}

/// Resident memory of a process, from /proc.
enum Memory {
    /// VmRSS of `pid` in MiB.
    static func residentMiB(pid: Int32) -> Double { statusMiB(pid: pid, field: "VmRSS:") }

    /// The highest VmRSS of `pid` in MiB while `body` runs, polled every
    /// 25 ms and once more at the end.
    static func peakResidentMiB(pid: Int32, during body: () async throws -> Void) async rethrows -> Double {
        let sampler = Task {
            var highest = residentMiB(pid: pid)
            while !Task.isCancelled {
                highest = Swift.max(highest, residentMiB(pid: pid))
                try? await Task.sleep(for: .milliseconds(25))
            }
            return highest
        }
        defer { sampler.cancel() }
        try await body()
        sampler.cancel()
        return Swift.max(await sampler.value, residentMiB(pid: pid))
    }

    /// RssAnon of `pid` in MiB: resident memory that is the process's own
    /// data, not pages of its binary and libraries.
    static func anonymousMiB(pid: Int32) -> Double { statusMiB(pid: pid, field: "RssAnon:") }

    /// Resident MiB of `pid`'s mappings of its own executable file (its
    /// code and constant data, from /proc/PID/smaps).
    static func executableResidentMiB(pid: Int32) -> Double {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"),
              let smaps = try? String(contentsOfFile: "/proc/\(pid)/smaps", encoding: .utf8) else { return .nan }
        var inExecutable = false
        var kibibytes = 0.0
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.first?.isHexDigit == true {
                // A mapping's header: address range, permissions, offset, device, inode, path.
                inExecutable = fields.count >= 6 && fields[5...].joined(separator: " ") == executable
            } else if inExecutable, fields.first == "Rss:", fields.count >= 2 {
                kibibytes += Double(fields[1]) ?? 0
            }
        }
        return kibibytes / 1024
    }

    private static func statusMiB(pid: Int32, field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return .nan }
        for line in status.split(separator: "\n") where line.hasPrefix(field) {
            return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan) / 1024
        }
        return .nan
    }
}

/// CPU time the hypervisor gave to other guests (`steal` in /proc/stat):
/// on a shared virtual machine it makes figures swing between runs.
struct CPUSteal {
    private let steal: Double
    private let total: Double

    /// The counters now.
    init() {
        let line = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8))?.split(separator: "\n").first ?? ""
        let fields = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        steal = fields.count > 7 ? fields[7] : .nan
        total = fields.reduce(0, +)
    }

    /// Percent of all CPU time stolen between `start` and now.
    static func percent(since start: CPUSteal) -> Double {
        let now = CPUSteal()
        return 100 * (now.steal - start.steal) / max(1, now.total - start.total)
    }
}

/// Guest memory handed back to the hypervisor (free page reporting, on
/// kernels that count it in /sys/module/page_reporting): a page reported
/// is gone from the guest, so its next use faults on the host as well.
struct FreePageReporting {
    private static let counter = "/sys/module/page_reporting/parameters/reported_kib"
    private let kibibytes: Double?

    /// The counter now; nil where the kernel does not count.
    init() {
        kibibytes = (try? String(contentsOfFile: Self.counter, encoding: .utf8))
            .flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// GiB reported between `start` and now, or nil where not counted.
    static func gibibytes(since start: FreePageReporting) -> Double? {
        guard let before = start.kibibytes, let after = FreePageReporting().kibibytes else { return nil }
        return (after - before) / 1_048_576
    }
}

/// Milliseconds of CPU per MiB moved, in protd and in this process (the client).
struct CPUPerMiB {
    let daemon: Double
    let client: Double
    /// Both sides together.
    var total: Double { daemon + client }
}

/// CPU time protd and this process (the client) spend in the bodies given
/// to `count`, added up.
struct CPUAccount {
    let daemon: Int32
    private var daemonSeconds = 0.0
    private var clientSeconds = 0.0

    init(daemon: Int32) { self.daemon = daemon }

    /// Runs `body`, adding the CPU time each side spends meanwhile.
    mutating func count<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        let daemonBefore = Self.cpuSeconds(daemon)
        let clientBefore = Self.cpuSeconds(getpid())
        let result = try await body()
        daemonSeconds += Self.cpuSeconds(daemon) - daemonBefore
        clientSeconds += Self.cpuSeconds(getpid()) - clientBefore
        return result
    }

    /// Milliseconds of CPU per MiB each side spent in everything counted,
    /// for `mebibytes` moved.
    func millisecondsPerMiB(_ mebibytes: Double) -> CPUPerMiB {
        CPUPerMiB(daemon: 1000 * daemonSeconds / mebibytes, client: 1000 * clientSeconds / mebibytes)
    }

    /// User plus system CPU seconds of `pid` (NaN when it cannot be read).
    private static func cpuSeconds(_ pid: Int32) -> Double { ProcessStat(pid: pid)?.cpuSeconds ?? .nan }
}
