import DataProtection
import Foundation
import ProtectionTestSupport

/// Lock fan-out to many subscribers, unlock at the default KDF cost, and
/// passwd with few and many files stored.
struct LockWorkload {
    let options: BenchOptions
    let report: Report

    /// Delivery latency of willBecomeUnavailable to every subscriber, and
    /// lock completion when all acknowledge at once; then the same for the
    /// floor (`FanOutFloor`), as a bound. The subscribers live in processes
    /// of their own (`SubscriberFleet`); each acknowledges as soon as it has
    /// the event. Latency runs from just before the lock request to each
    /// subscriber's receipt, on the clock all processes share. Each round
    /// starts once the previous unlock's event has reached every
    /// subscriber, as the floor's rounds start with nothing in flight.
    func fanOut(daemon: DaemonProcess, admin: DataProtectionClient) async throws {
        let count = options.subscribers
        let setup = "subscribers in \((count + SubscriberFleet.subscribersPerProcess - 1) / SubscriberFleet.subscribersPerProcess) "
            + "processes of \(SubscriberFleet.helperName) (at most \(SubscriberFleet.subscribersPerProcess) each), each "
            + "acknowledging at once; a round starts once every subscriber has the previous unlock's didBecomeAvailable "
            + "(the floor has no unlock); percentiles taken per round, median of \(options.repetitions) rounds with their min..max"
        let protd = try await fanOutThroughProtd(daemon: daemon, admin: admin)
        addRows(protd, label: "lock fan-out, \(count) subscribers", targets: true,
                deliveryNote: "from just before the lock request to each subscriber's receipt of willBecomeUnavailable, "
                    + "on ContinuousClock (CLOCK_MONOTONIC, the same in every process), through the client library's "
                    + "event observer (observeEvents), which acknowledges on the I/O thread; " + setup,
                completionNote: "from the lock request to its answer (lock with wait), delivery to every subscriber and "
                    + "their acknowledgements included; " + setup)
        let iterated = try await fanOutThroughProtd(daemon: daemon, admin: admin, subscriberArguments: ["--iterator"])
        addRows(iterated, label: "lock fan-out, \(count) iterating", targets: false,
                deliveryNote: "the same through the client library's events iterator, one task per subscriber, "
                    + "acknowledging with acknowledge(_:); " + setup,
                completionNote: "as for the observers")
        let wire = try await fanOutThroughProtd(daemon: daemon, admin: admin, subscriberArguments: ["--wire"])
        addRows(wire, label: "lock fan-out, \(count) by hand", targets: false,
                deliveryNote: "subscribers that speak protd's protocol by hand (hello, subscribe, acknowledge) in one "
                    + "poll(2) loop per process, without the client library: protd's own share; " + setup,
                completionNote: "as for the client library's observers")
        if let reason = FanOutFloor.unavailableReason(subscribers: count) {
            report.skip("lock fan-out floor: \(reason)")
            return
        }
        let floor = try await FanOutFloor.measure(subscribers: count, rounds: options.repetitions, directory: options.dir)
        addRows(floor, label: "lock fan-out floor, \(count) sockets", targets: false,
                deliveryNote: "no protd, no client library: protd-bench writes 8 bytes to each plain Unix socket; " + setup,
                completionNote: "until protd-bench has read every subscriber's 8-byte acknowledgement")
        let f = Report.format
        report.bound("lock fan-out: the same \(count) subscriber processes on plain Unix sockets, served by protd-bench "
                     + "with no protd and no client library, get their notification at p99 \(f(floor.deliveryMilliseconds(0.99).median)) ms "
                     + "and all acknowledge in \(f(floor.completionMilliseconds.median)) ms; the targets ask 20 and 50 ms, "
                     + "protd takes \(f(protd.deliveryMilliseconds(0.99).median)) and \(f(protd.completionMilliseconds.median)) ms "
                     + "with the client library's observers (\(f(iterated.deliveryMilliseconds(0.99).median)) and "
                     + "\(f(iterated.completionMilliseconds.median)) ms with its events iterators), \(f(wire.deliveryMilliseconds(0.99).median)) and "
                     + "\(f(wire.completionMilliseconds.median)) ms with subscribers that speak its protocol by hand")
    }

    private func fanOutThroughProtd(daemon: DaemonProcess, admin: DataProtectionClient,
                                    subscriberArguments: [String] = []) async throws -> FanOutTimes {
        let fleet = try await SubscriberFleet.launch(subscribers: options.subscribers, socketPath: daemon.socketPath,
                                                     arguments: subscriberArguments)
        defer { fleet.stop() }
        var times = FanOutTimes()
        for _ in 0..<options.repetitions {
            let started = ContinuousClock.now
            try await admin.lock(grace: .seconds(30), waitUntilLocked: true)
            times.completion.append(seconds(since: started))
            let sent = fleet.origin.duration(to: started)
            times.deliveryRounds.append(try await fleet.nextDelivery().map { ($0 - sent) / .seconds(1) })
            try await admin.unlock(passcode: "bench")
            try await fleet.awaitAvailable()
        }
        return times
    }

    private func addRows(_ times: FanOutTimes, label: String, targets: Bool, deliveryNote: String, completionNote: String) {
        let p99 = times.deliveryMilliseconds(0.99)
        report.add(Row(workload: label, measure: "delivery p50", unit: "ms", sample: times.deliveryMilliseconds(0.5)))
        report.add(Row(workload: label, measure: "delivery p99", unit: "ms", sample: p99,
                       target: targets ? "<= 20 ms" : "", met: targets ? p99.median <= 20 : nil, note: deliveryNote))
        report.add(Row(workload: label, measure: "delivery max", unit: "ms", sample: times.deliveryMilliseconds(1)))
        let completion = times.completionMilliseconds
        report.add(Row(workload: label, measure: "lock complete, all acknowledge", unit: "ms", sample: completion,
                       target: targets ? "<= 50 ms" : "", met: targets ? completion.median <= 50 : nil, note: completionNote))
    }

    /// Unlock time at the KDF cost the daemon was started with.
    func unlock(admin: DataProtectionClient, costLabel: String) async throws {
        let sample = try await Stopwatch.sample(options.repetitions) {
            try await admin.lock(grace: .zero)
            try await admin.unlock(passcode: "bench")
        }
        report.add(Row(workload: "unlock", measure: "lock + unlock (\(costLabel))", unit: "s", sample: sample))
    }

    /// Timed changes per daemon for each repetition asked for (an even
    /// number, so the ABBA turns come out even).
    static let changesPerRepetition = 6

    /// passwd with 10 and with `options.files` files stored, each in a
    /// daemon of its own, timed in turns (few, many, many, few, ...) so
    /// that the machine's drift during the run weighs on both alike.
    ///
    /// Each daemon changes once untimed first, and each timed change starts
    /// from fresh pages (`FreshPages`, twice the 128 MiB its two Argon2id
    /// runs touch). In run AP the first change in each daemon and a later
    /// stretch were slow (0.156-0.175 s against 0.126-0.138), three of the
    /// six slow ones fell on the 10,000-file side, and its median came out
    /// 1.23x the other's, while four `--only lock` runs just after gave
    /// 0.99-1.03x. A change takes about 0.14 s, and single changes swing
    /// by 15% or more here: with six each, run BF's ratio came out 1.11x
    /// (ranges 0.123-0.153 and 0.128-0.163 s) and two `--only lock` runs
    /// right after 1.01x and 1.00x. So each daemon changes
    /// `changesPerRepetition` times per repetition, 18 at the default.
    func passwd() async throws {
        let few = try await PasscodeChanger(options: options, files: 10)
        let many = try await PasscodeChanger(options: options, files: options.files)
        try await few.change(timed: false)
        try await many.change(timed: false)
        for turn in 0..<(options.repetitions * Self.changesPerRepetition) {
            for changer in turn.isMultiple(of: 2) ? [few, many] : [many, few] {
                try FreshPages.prepare(bytes: PasscodeChanger.bytesTouched * 2)
                try await changer.change()
            }
        }
        await few.stop()
        await many.stop()
        let fewSample = Sample(values: few.seconds)
        let manySample = Sample(values: many.seconds)
        let note = "a daemon of its own for each, timed in turns (ABBA), \(few.seconds.count) changes each after "
            + "an untimed first, each from fresh pages (FreshPages)"
        report.add(Row(workload: "passwd", measure: "with 10 files", unit: "s", sample: fewSample, note: note))
        report.add(Row(workload: "passwd", measure: "with \(options.files) files", unit: "s", sample: manySample, note: note))
        let ratio = manySample.median / fewSample.median
        report.add(Row(workload: "passwd", measure: "\(options.files) files / 10 files", unit: "x", sample: Sample(values: [ratio]),
                       target: "<= 1.1x", met: ratio <= 1.1))
    }
}

/// A daemon with `files` files stored whose passcode `change()` switches
/// between two values, timing each change.
private final class PasscodeChanger {
    private let daemon: DaemonProcess
    private let client: DataProtectionClient
    private var current = "bench"
    /// How long each `change()` took.
    private(set) var seconds: [Double] = []

    init(options: BenchOptions, files: Int) async throws {
        daemon = try options.startDaemon()
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.setPasscode(current)
        for index in 0..<files { try await client.file("stored/\(index)").write([1], protection: .none, durable: false) }
    }

    /// Bytes of memory one change touches: Argon2id for the old passcode and for
    /// the new one, at the bench's cost.
    static let bytesTouched = 2 * BenchOptions.passcodeCost.memoryKiB * 1024

    /// One passwd, from the current passcode to the other; its time is kept
    /// when `timed`.
    func change(timed: Bool = true) async throws {
        let next = current == "bench" ? "bench2" : "bench"
        let took = try await Stopwatch.time { try await client.setPasscode(next, old: current) }
        if timed { seconds.append(took) }
        current = next
    }

    /// Closes the client and stops the daemon (on error, `DaemonProcess`
    /// stops it when released).
    func stop() async {
        await client.close()
        _ = daemon.stop()
    }
}
