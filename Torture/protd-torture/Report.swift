import Foundation

/// The figures of a run, as a text table and as docs/TORTURE.md.
struct Report {
    let rounds: Int
    let workers: Int
    let counts: Counts
    let failures: [Failure]
    let restarts: [Double]

    var median: Double {
        let sorted = restarts.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    private func ms(_ value: Double) -> String { String(format: "%.1f", value) }

    var tables: String {
        var lines = ["| Operation | Acknowledged | Refused | Cut by the kill |", "|---|---:|---:|---:|"]
        var totals = [0, 0, 0]
        for kind in Counts.kinds {
            let row = counts.table[kind] ?? [0, 0, 0]
            totals = zip(totals, row).map { $0 + $1 }
            lines.append("| \(kind) | \(row[0]) | \(row[1]) | \(row[2]) |")
        }
        lines.append("| **all** | **\(totals[0])** | **\(totals[1])** | **\(totals[2])** |")
        lines += ["", "| Invariant failures | Count |", "|---|---:|"]
        for kind in Failure.Kind.allCases {
            lines.append("| \(kind.rawValue) | \(failures.filter { $0.kind == kind }.count) |")
        }
        lines += ["", "| Restart | Value |", "|---|---:|",
                  "| rounds (kill -9, restart, check) | \(rounds) |",
                  "| client connections per round | \(workers) + 1 locking |",
                  "| time to ready, median | \(ms(median)) ms |",
                  "| time to ready, max | \(ms(restarts.max() ?? 0)) ms |"]
        return lines.joined(separator: "\n")
    }

    var text: String {
        var out = tables
        if !failures.isEmpty {
            out += "\n\nFailures:\n" + failures.map { "- \($0)" }.joined(separator: "\n")
        }
        return out
    }

    var markdown: String {
        var out = """
            # Torture: kill -9 under load

            `make torture` (not part of `make test`; `ROUNDS=50` by default, and
            \(rounds) in this run) builds `Torture/` in release mode and runs
            `protd-torture`. It starts the real release `protd` on a temporary state
            directory with a passcode set, and repeats a round: \(workers) client
            connections do random operations for a random time from `--min-load-ms`
            to `--max-load-ms` (0.2 to 1.5 s by default) while one more locks (no
            grace period) and unlocks, then
            protd gets SIGKILL, is started again on the same state and is unlocked,
            and the invariants are checked.

            Each worker owns a few names it creates (`open(.create)`), writes whole
            (durable, 0 B to 2.4 MiB, past one request's size so some are streamed),
            moves between classes, deletes and reads back, and a few it writes
            through a handle (random offsets) and syncs; all workers race
            `open(.create)` on shared names. Whole-file content is a header naming
            the file and version plus a fill derived from both, so a read shows
            whether it holds exactly one version and which. Answers are checked
            while running too (a read sees the last acknowledged write, a handle
            read its writes, at most one racing create wins).

            After each restart:

            1. every listed name can be `stat`ed, opened and read in full (class A
               too, after the unlock), and its size matches;
            2. a whole-file name holds its last acknowledged state (version and
               class) or that of the request in flight at the kill, never a mix;
            3. the namespace's `tmp` directory is empty;
            4. a handle file keeps every synced byte except where a later write
               (acknowledged or in flight) went;
            5. a name whose delete was acknowledged, with no write since, is absent,
               and no name appears that was never created;
            6. protd restarts each round; time to ready is from spawn to the first
               successful connect(), polled every 2 ms.

            "Refused" counts definite refusals (mostly class A while locked, creates
            of existing names, deletes of absent ones); "cut by the kill" counts
            requests that got no answer, which may or may not have taken effect.

            ## Last run


            """
        out += tables + "\n"
        if !failures.isEmpty {
            out += "\n## Failures of the last run\n\n" + failures.map { "- \($0)" }.joined(separator: "\n") + "\n"
        }
        return out
    }
}
