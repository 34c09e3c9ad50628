import Foundation

/// One row of the results table.
struct Row: Codable {
    var workload: String
    var measure: String
    var unit: String
    var sample: Sample
    /// Target text, e.g. ">= 2x age"; empty when there is none.
    var target: String = ""
    /// Whether the target is met; nil when there is no target or it could not be evaluated.
    var met: Bool?
    var note: String = ""
}

/// Collects rows, prints the table, writes Markdown.
final class Report {
    private(set) var rows: [Row] = []
    var skipped: [String] = []
    /// Bounds computed from this run's own baselines, for targets they
    /// put out of (or barely within) reach on this machine.
    private(set) var bounds: [String] = []
    let machine: [String: String]

    init(machine: [String: String]) { self.machine = machine }

    func add(_ row: Row) {
        rows.append(row)
        print(Self.line(row))
        fflush(nil)  // rows appear as measured, also when piped
    }

    func skip(_ reason: String) {
        // A peer that cannot run is skipped by every row that uses it: say so once.
        guard !skipped.contains(reason) else { return }
        skipped.append(reason)
        print("skipped: \(reason)")
    }

    /// Records a bound that explains a target, in words with its figures.
    func bound(_ text: String) {
        bounds.append(text)
        print("bound: \(text)")
    }

    static func format(_ value: Double) -> String {
        if value.isNaN { return "n/a" }
        if value >= 100 { return String(format: "%.0f", value) }
        if value >= 1 { return String(format: "%.2f", value) }
        return String(format: "%.4f", value)
    }

    static func line(_ row: Row) -> String {
        let verdict = row.met.map { $0 ? "met" : "NOT met" } ?? ""
        return [row.workload.padding(toLength: 34, withPad: " ", startingAt: 0),
                row.measure.padding(toLength: 40, withPad: " ", startingAt: 0),
                "\(format(row.sample.median)) \(row.unit)".padding(toLength: 16, withPad: " ", startingAt: 0),
                "[\(format(row.sample.min))..\(format(row.sample.max))]".padding(toLength: 20, withPad: " ", startingAt: 0),
                row.target.isEmpty ? "" : "\(row.target): \(verdict)"].joined(separator: " ")
    }

    func markdown(command: String) -> String {
        var text = """
            # Benchmarks

            Produced by `\(command)` on \(machine["date"] ?? "?"). Rerun with `make bench` (see `make bench ARGS=--help`).
            Every figure is the median of several runs, with min..max; comparisons are ratios against baselines
            measured in the same invocation. The client (protd-bench) and the daemon share the machine's cores,
            so protd figures include the client's own work; peers (age, gocryptfs, kernel fscrypt, plain files)
            are driven the same way from the same process or as child processes. Before each timed large-file
            write, every writer's alike, the bench touches and frees twice the file's size, so none starts with
            pages the VM handed back to the host (docs/DESIGN.md, Writes); before each timed passwd, twice what
            its two Argon2id runs touch. protd's large-file write and read, the plain file floor and age take
            turns, one repetition of each per round, so the VM's speed drifting over the run weighs on a target
            and its baseline alike.

            ## Machine

            | | |
            |---|---|

            """
        for key in machine.keys.sorted() { text += "| \(key) | \(machine[key] ?? "") |\n" }
        text += "\n## Results\n\n| workload | measure | median | min..max | target | met |\n|---|---|---|---|---|---|\n"
        for row in rows {
            text += "| \(row.workload) | \(row.measure) | \(Self.format(row.sample.median)) \(row.unit) | "
                + "\(Self.format(row.sample.min))..\(Self.format(row.sample.max)) | \(row.target) | "
                + "\(row.met.map { $0 ? "yes" : "**no**" } ?? "") |\n"
        }
        if !bounds.isEmpty {
            text += "\n## What bounds the targets not met, or that nothing does\n\n" + bounds.map { "- \($0)" }.joined(separator: "\n") + "\n"
        }
        if !skipped.isEmpty {
            text += "\n## Not measured here\n\n" + skipped.map { "- \($0)" }.joined(separator: "\n") + "\n"
        }
        let notes = rows.filter { !$0.note.isEmpty }
        if !notes.isEmpty {
            text += "\n## Notes\n\n" + notes.map { "- \($0.workload), \($0.measure): \($0.note)" }.joined(separator: "\n") + "\n"
        }
        return text
    }
}
