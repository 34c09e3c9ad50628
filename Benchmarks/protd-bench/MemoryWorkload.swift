import DataProtection
import Foundation
import ProtectionTestSupport

/// Daemon memory idle and with many open handles, and cold start to ready.
struct MemoryWorkload {
    let options: BenchOptions
    let report: Report

    func idleAndHandles(daemon: DaemonProcess) async throws {
        let idle = Memory.residentMiB(pid: daemon.pid)
        report.add(Row(workload: "memory", measure: "daemon RSS idle", unit: "MiB", sample: Sample(values: [idle]),
                       target: "<= 16 MiB", met: idle <= 16))
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
