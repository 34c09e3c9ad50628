import DataProtection
import Foundation
import ProtectionTestSupport

/// Cold start to ready, idle RSS and RSS with many open handles, each
/// measured on a fresh daemon per round so that every round is a run of its
/// own; and the RSS of a Swift process that only reads the same
/// configuration file, as a floor.
struct MemoryWorkload {
    let options: BenchOptions
    let report: Report

    /// At least 3 rounds, more with --repetitions.
    var rounds: Int { max(3, options.repetitions) }
    /// How long a fresh daemon runs before its idle RSS is read.
    static let settle: Duration = .milliseconds(300)
    /// The idle RSS goal (MiB).
    static let idleTargetMiB = 24

    func run() async throws {
        var coldStart: [Double] = []
        var idle: [Double] = []
        var anonymous: [Double] = []
        var executable: [Double] = []
        var handles: [Double] = []
        var configuration = ""
        for _ in 0..<rounds {
            let start = ContinuousClock.now
            let daemon = try options.startDaemon()
            defer { daemon.stop() }
            configuration = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            coldStart.append(seconds(since: start) * 1000)
            try await Task.sleep(for: Self.settle)
            let settled = Memory.residentMiB(pid: daemon.pid)
            idle.append(settled)
            anonymous.append(Memory.anonymousMiB(pid: daemon.pid))
            executable.append(Memory.executableResidentMiB(pid: daemon.pid))
            handles.append(try await residentWithOpenHandles(daemon: daemon) - settled)
        }
        let floor = Sample(values: try (0..<rounds).map { _ in try configurationFloor(configuration) })
        let idleSample = Sample(values: idle)
        let anonymousMiB = Report.format(Sample(values: anonymous).median)
        let perRound = "one fresh daemon per round, \(rounds) rounds"
        report.add(Row(workload: "memory", measure: "Swift process that only reads the config (floor)", unit: "MiB",
                       sample: floor,
                       note: "protd-bench-idle, built like protd: reads the daemon's YAML configuration file with "
                           + "swift-configuration and Yams (on Foundation) as protd does, then sleeps; a daemon "
                           + "configured this way cannot be smaller"))
        let target = Double(Self.idleTargetMiB)
        report.add(Row(workload: "memory", measure: "daemon RSS idle", unit: "MiB", sample: idleSample,
                       target: "<= \(Self.idleTargetMiB) MiB", met: idleSample.median <= target,
                       note: "300 ms after it accepts its first connection, \(perRound); of which \(anonymousMiB) MiB "
                           + "is the daemon's own (anonymous) memory; the rest is pages of its binary and the Swift, "
                           + "Foundation and C libraries"))
        if idleSample.median > target {
            let f = Report.format
            let room = target - floor.median
            let share = room > 0
                ? "which leaves \(f(room)) MiB of the \(Self.idleTargetMiB) MiB target for protd's own code, SwiftNIO, libsodium and data"
                : "which is the whole \(Self.idleTargetMiB) MiB target before any of protd's own code, SwiftNIO, libsodium and data"
            report.bound("idle RSS: a Swift program built like protd that reads the same configuration file as protd "
                         + "does (Foundation, swift-configuration, Yams) and does nothing else is \(f(floor.median)) "
                         + "MiB resident here, \(share); the protd executable's own resident pages (its code, the "
                         + "Swift packages and, when linked statically, the Swift runtime and Foundation) are "
                         + "\(f(Sample(values: executable).median)) MiB, and its anonymous memory \(anonymousMiB) MiB")
        }
        let handleSample = Sample(values: handles)
        let checked = options.handles >= 10_000
        report.add(Row(workload: "memory", measure: "\(options.handles) open handles over idle", unit: "MiB",
                       sample: handleSample, target: checked ? "<= 64 MiB" : "", met: checked ? handleSample.median <= 64 : nil,
                       note: "1000 handles per connection, \(perRound)"))
        let startSample = Sample(values: coldStart)
        report.add(Row(workload: "memory", measure: "cold start to ready", unit: "ms", sample: startSample,
                       target: "<= 100 ms", met: startSample.median <= 100,
                       note: "spawn to the first successful connect(), polled every \(DaemonProcess.readinessPollMilliseconds) "
                           + "ms, so up to that much high; \(perRound)"))
    }

    /// The daemon's RSS with `options.handles` handles open (on new files),
    /// which are closed again before it returns.
    private func residentWithOpenHandles(daemon: DaemonProcess) async throws -> Double {
        let perConnection = 1000
        var clients: [DataProtectionClient] = []
        var handles: [ProtectedFile.Handle] = []
        for index in 0..<options.handles {
            if index % perConnection == 0 { clients.append(try await DataProtectionClient.connect(socketPath: daemon.socketPath)) }
            handles.append(try await clients[clients.count - 1].file("handles/\(index)").open(.create(.completeUnlessOpen)))
        }
        let resident = Memory.residentMiB(pid: daemon.pid)
        for handle in handles { await handle.close() }
        for client in clients { await client.close() }
        return resident
    }

    /// Resident MiB of protd-bench-idle, built next to this binary, once it
    /// has read `configuration` (the daemon's YAML file) from a file.
    private func configurationFloor(_ configuration: String) throws -> Double {
        let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("protd-bench-idle").path
        let log = options.dir + "/protd-bench-idle-\(getpid()).log"
        let file = options.dir + "/protd-bench-idle-\(getpid()).yaml"
        defer {
            unlink(log)
            unlink(file)
        }
        try configuration.write(toFile: file, atomically: true, encoding: .utf8)
        let process = try SpawnedProcess([binary, file], logPath: log)
        defer { _ = process.stop(signal: SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? String(contentsOfFile: log, encoding: .utf8))?.contains("ready") != true, ContinuousClock.now < deadline {
            usleep(10_000)
        }
        return Memory.residentMiB(pid: process.pid)
    }
}
