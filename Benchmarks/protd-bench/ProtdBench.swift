import ArgumentParser
import DataProtection
import Foundation
import ProtectionTestSupport

/// protd-bench: every workload in one invocation, a table on stdout, and
/// optionally docs/BENCHMARKS.md.
@main
struct ProtdBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protd-bench", abstract: "Benchmark protd against plain files, raw libsodium, age, gocryptfs and kernel fscrypt.")

    @OptionGroup var options: BenchOptions

    mutating func run() async throws {
        options.applyQuick()
        let steal = CPUSteal()
        let pageReporting = FreePageReporting()
        BenchEnvironment.raiseFileLimit()
        let report = Report(machine: BenchEnvironment.describe(options: options))
        print("protd-bench: \(report.machine["settings"] ?? "")")

        if options.runs("memory") { try await MemoryWorkload(options: options, report: report).run() }
        let daemon = try options.startDaemon()
        let admin = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await admin.setPasscode("bench")
        if options.runs("large") {
            _ = try await LargeFileWorkload(options: options, report: report).run(daemon: daemon, client: admin)
        }
        if options.runs("default") { try await DefaultSettingsWorkload(options: options, report: report).run() }
        if options.runs("overwrite") { try await HandleOverwriteWorkload(options: options, report: report).run(client: admin) }
        if options.runs("small") { try await SmallFilesWorkload(options: options, report: report).run(daemon: daemon) }
        if options.runs("names") { try await NamesWorkload(options: options, report: report).run() }
        if options.runs("lock") {
            let lock = LockWorkload(options: options, report: report)
            try await lock.fanOut(daemon: daemon, admin: admin)
            try await lock.unlock(admin: admin, costLabel: BenchOptions.passcodeCostLabel)
            try await lock.passwd()
        }
        await admin.close()
        daemon.stop()

        report.add(Row(workload: "machine", measure: "CPU time stolen by the hypervisor during the run", unit: "%",
                       sample: Sample(values: [CPUSteal.percent(since: steal)]),
                       note: "other guests' load on the host; with steal above a few percent, figures can swing "
                           + "by 2x between runs, ratios within one run much less"))
        if let reported = FreePageReporting.gibibytes(since: pageReporting) {
            report.add(Row(workload: "machine", measure: "memory handed back to the hypervisor during the run", unit: "GiB",
                           sample: Sample(values: [reported]),
                           note: "free page reporting (virtio-balloon): memory the guest frees goes back to the host, "
                               + "and the guest's next use of it faults on the host as well, so writes into new pages "
                               + "(new tmpfs files, fresh buffers) pay for it; plain file write against plain file "
                               + "overwrite in place shows what new pages cost in this run"))
        }
        let command = "protd-bench " + CommandLine.arguments.dropFirst().joined(separator: " ")
        if let markdown = options.markdown {
            try report.markdown(command: command).write(toFile: markdown, atomically: true, encoding: .utf8)
            print("wrote \(markdown)")
        }
        let missed = report.rows.filter { $0.met == false }.count
        let met = report.rows.filter { $0.met == true }.count
        print("targets: \(met) met, \(missed) not met")
    }
}

extension BenchOptions {
    /// The Argon2id cost every bench daemon runs at: the default of a real
    /// deployment (Config/protd.yaml).
    static let passcodeCost = (operations: 2, memoryKiB: 65536)
    /// `passcodeCost` in words, for row labels.
    static var passcodeCostLabel: String {
        "Argon2id ops \(passcodeCost.operations), \(passcodeCost.memoryKiB / 1024) MiB"
    }

    /// A daemon as every workload uses it: room for the fan-out's
    /// subscribers and the memory workload's handles (all of one uid, so
    /// the per-uid limits are raised too), and the default
    /// Argon2id cost of a real deployment, so unlock and passwd times mean
    /// something. `cipher` is `storage.cipher` (`auto` by default); the
    /// daemon's directory is in `directory`, by default `--dir`.
    func startDaemon(cipher: String = "auto", in directory: String? = nil) throws -> DaemonProcess {
        let limits = """
            limits:
              max-connections: \(subscribers + 64)
              max-connections-per-uid: \(subscribers + 64)
              max-subscribers-per-uid: \(subscribers)
              max-open-handles-per-connection: 1024
              max-open-handles-per-uid: \(handles + 1024)
            storage:
              cipher: \(cipher)

            """
        return try DaemonProcess(gracePeriodSeconds: 30, extraConfig: limits, argon2: Self.passcodeCost, logLevel: "warning",
                                 parentDirectory: directory ?? dir)
    }
}
