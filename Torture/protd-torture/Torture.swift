import ArgumentParser
import DataProtection
import Foundation
import ProtectionTestSupport

/// protd-torture: rounds of concurrent operations on the real protd, each
/// ended by SIGKILL, then a restart and a check of what survived.
@main
struct ProtdTorture: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protd-torture",
        abstract: "Kill protd with SIGKILL under concurrent load, restart it and check its invariants.")

    @Option(help: "Kill-and-restart rounds.") var rounds = 50
    @Option(help: "Client connections doing file operations (one more locks and unlocks).") var workers = 6
    @Option(help: "Names each worker writes whole.") var wholeNames = 4
    @Option(help: "Names each worker writes through handles.") var handleNames = 2
    @Option(help: "Shortest load before the kill, in milliseconds.") var minLoadMs = 200
    @Option(help: "Longest load before the kill, in milliseconds.") var maxLoadMs = 1500
    @Option(help: "Seed of the random choices (default: from the clock).") var seed: UInt64?
    @Option(help: "Also write the report to this Markdown file.") var markdown: String?

    static let passcode = "torture"

    mutating func run() async throws {
        let seed = self.seed ?? UInt64(Date().timeIntervalSince1970 * 1000)
        print("protd-torture: \(rounds) rounds, \(workers) workers, seed \(seed)")
        var random = SeededRandom(seed: seed)
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, logLevel: "notice")
        do {
            let admin = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            try await admin.setPasscode(Self.passcode)
            await admin.close()
        }
        var team = (0..<workers).map { Worker(index: $0, seed: seed, wholeNames: wholeNames, handleNames: handleNames) }
        var cycler = LockCycler(random: SeededRandom(seed: seed ^ 0x5eed))
        var counts = Counts()
        var failures: [Failure] = []
        var restarts: [Double] = []
        let races = RaceBoard()

        for round in 1...rounds {
            let clients = try await (0..<workers).asyncMap { _ in try await DataProtectionClient.connect(socketPath: daemon.socketPath) }
            let lockClient = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            let raceNames = (0..<3).map { "race/r\(round)-\($0)" }
            let load = Int.random(in: minLoadMs...maxLoadMs, using: &random)
            let (ran, lockRan) = await withTaskGroup(of: (Int, Worker?, LockCycler?).self) { group in
                for (i, worker) in team.enumerated() {
                    group.addTask {
                        var worker = worker
                        await worker.run(round: round, client: clients[i], races: races, raceNames: raceNames)
                        return (i, worker, nil)
                    }
                }
                group.addTask { [cycler] in
                    var cycler = cycler
                    await cycler.run(round: round, client: lockClient, passcode: Self.passcode)
                    return (-1, nil, cycler)
                }
                try? await Task.sleep(for: .milliseconds(load))
                daemon.kill9()
                var ran = team
                var lockRan = cycler
                for await (i, worker, lock) in group {
                    if let worker { ran[i] = worker }
                    if let lock { lockRan = lock }
                }
                return (ran, lockRan)
            }
            team = ran
            cycler = lockRan
            for client in clients { await client.close() }
            await lockClient.close()

            let started = ContinuousClock.now
            do {
                try daemon.start()
            } catch {
                // What the round found while running still counts.
                for i in team.indices { failures += team[i].failures }
                failures += cycler.failures
                failures.append(Failure(round: round, kind: .restart, detail: "\(error)"))
                print("round \(round): protd did not restart; stopping")
                break
            }
            let took = ContinuousClock.now - started
            restarts.append(Double(took.components.seconds) * 1000 + Double(took.components.attoseconds) / 1e15)

            var checker = Checker(round: round, daemon: daemon, passcode: Self.passcode)
            await checker.check(team: &team, races: races)
            for i in team.indices {
                failures += team[i].failures
                team[i].failures = []
            }
            failures += cycler.failures
            cycler.failures = []
            failures += checker.failures
            let roundFailures = failures.filter { $0.round == round }
            print("round \(round): load \(load) ms, restart \(String(format: "%.1f", restarts.last ?? 0)) ms, "
                  + "\(checker.checkedNames) names checked, \(roundFailures.count) failures")
            for failure in roundFailures { print("  \(failure)") }
        }
        for worker in team { counts.merge(worker.counts) }
        counts.merge(cycler.counts)
        daemon.stop()

        let report = Report(rounds: restarts.count, workers: workers, counts: counts, failures: failures, restarts: restarts)
        print(report.text)
        if let markdown {
            try report.markdown.write(toFile: markdown, atomically: true, encoding: .utf8)
            print("wrote \(markdown)")
        }
        if !failures.isEmpty { throw ExitCode(1) }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
