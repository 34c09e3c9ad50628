import DataProtection
import Foundation
import ProtectionTestSupport

/// Lock fan-out to many subscribers, unlock at the default KDF cost, and
/// passwd with few and many files stored.
struct LockWorkload {
    let options: BenchOptions
    let report: Report

    /// Delivery latency of willBecomeUnavailable to every subscriber, and
    /// lock completion when all acknowledge at once. The subscribers live in
    /// processes of their own (`SubscriberFleet`); each acknowledges as soon
    /// as it has the event. Latency runs from just before the lock request
    /// to each subscriber's receipt, on the clock all processes share.
    func fanOut(daemon: DaemonProcess, admin: DataProtectionClient) async throws {
        let count = options.subscribers
        let fleet = try await SubscriberFleet.launch(subscribers: count, socketPath: daemon.socketPath)
        defer { fleet.stop() }
        var delivery: [Double] = []
        var completion: [Double] = []
        for _ in 0..<options.repetitions {
            let started = ContinuousClock.now
            try await admin.lock(grace: .seconds(30), waitUntilLocked: true)
            completion.append(seconds(since: started))
            let sent = fleet.origin.duration(to: started)
            delivery += try await fleet.nextDelivery().map { ($0 - sent) / .seconds(1) }
            try await admin.unlock(passcode: "bench")
        }
        let sorted = delivery.sorted()
        func percentile(_ p: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000 }
        let label = "lock fan-out, \(count) subscribers"
        let setup = "subscribers in \(fleet.processCount) processes of \(SubscriberFleet.helperName) (at most "
            + "\(SubscriberFleet.subscribersPerProcess) each), each acknowledging at once; \(options.repetitions) locks pooled"
        report.add(Row(workload: label, measure: "delivery p50", unit: "ms", sample: Sample(values: [percentile(0.5)])))
        report.add(Row(workload: label, measure: "delivery p99", unit: "ms", sample: Sample(values: [percentile(0.99)]),
                       target: "<= 20 ms", met: percentile(0.99) <= 20,
                       note: "from just before the lock request to each subscriber's receipt of willBecomeUnavailable, "
                           + "on ContinuousClock (CLOCK_MONOTONIC, the same in every process); " + setup))
        report.add(Row(workload: label, measure: "delivery max", unit: "ms", sample: Sample(values: [percentile(1)])))
        let completionMs = Sample(values: completion.map { $0 * 1000 })
        report.add(Row(workload: label, measure: "lock complete, all acknowledge", unit: "ms", sample: completionMs,
                       target: "<= 50 ms", met: completionMs.median <= 50,
                       note: "from the lock request to its answer (lock with wait), delivery to every subscriber and "
                           + "their acknowledgements included; " + setup))
    }

    /// Unlock time at the KDF cost the daemon was started with.
    func unlock(admin: DataProtectionClient, costLabel: String) async throws {
        let sample = try await Stopwatch.sample(options.repetitions) {
            try await admin.lock(grace: .zero)
            try await admin.unlock(passcode: "bench")
        }
        report.add(Row(workload: "unlock", measure: "lock + unlock (\(costLabel))", unit: "s", sample: sample))
    }

    /// passwd with 10 and with `options.files` files stored.
    func passwd(admin: DataProtectionClient) async throws {
        func timePasswd() async throws -> Sample {
            var current = "bench"
            return try await Stopwatch.sample(options.repetitions * 2) {
                let next = current == "bench" ? "bench2" : "bench"
                try await admin.setPasscode(next, old: current)
                current = next
            }
        }
        for index in 0..<10 { try await admin.file("few/\(index)").write([1], protection: .none, durable: false) }
        let few = try await timePasswd()
        for index in 0..<options.files { try await admin.file("many/\(index)").write([1], protection: .none, durable: false) }
        let many = try await timePasswd()
        report.add(Row(workload: "passwd", measure: "with 10 files", unit: "s", sample: few))
        report.add(Row(workload: "passwd", measure: "with \(options.files) files", unit: "s", sample: many))
        let ratio = many.median / few.median
        report.add(Row(workload: "passwd", measure: "\(options.files) files / 10 files", unit: "x", sample: Sample(values: [ratio]),
                       target: "<= 1.1x", met: ratio <= 1.1))
    }
}
