import ArgumentParser
import Foundation

/// What to run and how big.
struct BenchOptions: ParsableArguments {
    @Option(name: .customLong("size-mib"), help: "Size of the large-file workload in MiB.")
    var sizeMiB = 1024

    @Option(help: "Number of small files.")
    var files = 10_000

    @Option(help: "Repetitions per figure (the median is reported).")
    var repetitions = 3

    @Option(help: "Files in the names workload's namespace (in directories of 100).")
    var names = 100_000

    @Option(help: "Subscribers for the lock fan-out.")
    var subscribers = 1000

    @Option(help: "Open handles for the memory figure.")
    var handles = 10_000

    @Option(help: "Where files go: a tmpfs such as /dev/shm, or a disk directory.")
    var dir = "/dev/shm"

    @Option(help: "Run only these workloads (comma-separated: memory, large, default, overwrite, small, names, lock); all when absent.")
    var only: String?

    @Option(name: .customLong("disk-dir"),
            help: "A directory on a real disk for the default-settings and fsync rows (fsync on tmpfs does nothing).")
    var diskDir = "/var/tmp"

    @Flag(help: "Tiny sizes, one repetition: checks that everything runs (make bench-check).")
    var quick = false

    @Option(help: "Write the Markdown report here.")
    var markdown: String?

    /// Whether `workload` (one of the names `--only` takes) is to run.
    func runs(_ workload: String) -> Bool {
        guard let only else { return true }
        return only.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == workload }
    }

    /// Applies --quick.
    mutating func applyQuick() {
        guard quick else { return }
        sizeMiB = 4
        files = 50
        names = 1000
        repetitions = 1
        subscribers = 10
        handles = 50
    }
}
