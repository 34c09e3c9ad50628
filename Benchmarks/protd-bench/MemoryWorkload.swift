import DataProtection
import Foundation
import ProtectionTestSupport

/// Daemon memory idle and with many open handles, and cold start to ready.
struct MemoryWorkload {
    let options: BenchOptions
    let report: Report

    func idleAndHandles(daemon: DaemonProcess) async throws {
        let idle = Memory.residentMiB(pid: daemon.pid)
        let floor = try swiftFoundationFloor()
        report.add(Row(workload: "memory", measure: "do-nothing Swift + Foundation process RSS (floor)", unit: "MiB",
                       sample: Sample(values: [floor]),
                       note: "protd-bench-idle: loads Foundation as protd does, then sleeps; no daemon can be smaller"))
        report.add(Row(workload: "memory", measure: "daemon RSS idle", unit: "MiB", sample: Sample(values: [idle]),
                       target: "<= 16 MiB", met: idle <= 16,
                       note: "of which \(Report.format(Memory.anonymousMiB(pid: daemon.pid))) MiB is the daemon's own "
                           + "(anonymous) memory; the rest is pages of its binary and the Swift, Foundation and C libraries"))
        if idle > 16 {
            report.bound("idle RSS: a Swift program that loads Foundation and does nothing is \(Report.format(floor)) MiB "
                         + "resident here, which leaves \(Report.format(16 - floor)) MiB of the 16 MiB target for protd's own "
                         + "code, SwiftNIO, swift-configuration, libsodium and data; protd's anonymous memory alone is "
                         + "\(Report.format(Memory.anonymousMiB(pid: daemon.pid))) MiB")
        }
        let perConnection = 1000
        var clients: [DataProtectionClient] = []
        var handles: [ProtectedFile.Handle] = []
        for index in 0..<options.handles {
            if index % perConnection == 0 { clients.append(try await DataProtectionClient.connect(socketPath: daemon.socketPath)) }
            handles.append(try await clients[clients.count - 1].file("handles/\(index)").open(.create(.completeUnlessOpen)))
        }
        let growth = Memory.residentMiB(pid: daemon.pid) - idle
        report.add(Row(workload: "memory", measure: "\(options.handles) open handles over idle", unit: "MiB",
                       sample: Sample(values: [growth]), target: options.handles >= 10_000 ? "<= 64 MiB" : "",
                       met: options.handles >= 10_000 ? growth <= 64 : nil))
        for handle in handles { await handle.close() }
        for client in clients { await client.close() }
    }

    /// Resident MiB of protd-bench-idle, built next to this binary.
    private func swiftFoundationFloor() throws -> Double {
        let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("protd-bench-idle").path
        let log = options.dir + "/protd-bench-idle-\(getpid()).log"
        defer { unlink(log) }
        let process = try SpawnedProcess([binary], logPath: log)
        defer { _ = process.stop(signal: SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? String(contentsOfFile: log, encoding: .utf8))?.contains("ready") != true, ContinuousClock.now < deadline {
            usleep(10_000)
        }
        return Memory.residentMiB(pid: process.pid)
    }

    /// Time from starting the binary to a successful connection.
    func coldStart() throws {
        var values: [Double] = []
        for _ in 0..<max(3, options.repetitions) {
            let start = ContinuousClock.now
            let daemon = try DaemonProcess(logLevel: "warning", parentDirectory: options.dir)
            values.append(seconds(since: start) * 1000)
            daemon.stop()
        }
        let sample = Sample(values: values)
        report.add(Row(workload: "memory", measure: "cold start to ready", unit: "ms", sample: sample,
                       target: "<= 100 ms", met: sample.median <= 100,
                       note: "spawn to first accepted connection, polled every 20 ms, so up to 20 ms high"))
    }
}
