import DataProtection
import Foundation
import ProtectionTestSupport

/// Lookups and listings in a namespace of many files (`--names`, 100,000
/// by default) through the client library, against the same operations
/// with system calls on a plain tree of the same shape on the same file
/// system: what sealed names (docs/FORMAT.md 3) cost as the namespace
/// grows. A protd of its own holds only these files.
struct NamesWorkload {
    let options: BenchOptions
    let report: Report
    /// Files per directory: `d000/f00` .. `d999/f99` for 100,000.
    static let perDirectory = 100
    /// Bytes in each file.
    static let size = 256
    /// Clients creating the files, and requests each keeps in flight.
    static let clients = 8
    static let inFlight = 4

    /// Timed operations per repetition, one at a time from one client:
    /// lookups (stat, open + close), listings of one directory, listings
    /// of a prefix without its slash.
    private var lookups: Int { options.quick ? 50 : 2000 }
    private var directoryListings: Int { options.quick ? 5 : 200 }
    private var topListings: Int { options.quick ? 5 : 50 }

    func run() async throws {
        let directoryCount = max(1, options.names / Self.perDirectory)
        let width = max(3, String(directoryCount - 1).count)
        let directories = (0..<directoryCount).map { "d" + Self.zeroPadded($0, width) }
        let names = directories.flatMap { directory in
            (0..<Self.perDirectory).map { "\(directory)/f" + Self.zeroPadded($0, 2) }
        }
        let label = "names, \(directoryCount) dirs x \(Self.perDirectory) files"
        let shape = "\(names.count) files of \(Self.size) bytes, class none, as \(directories[0])/f00 .. "
            + "\(directories[directories.count - 1])/f99 (\(directoryCount) directories of \(Self.perDirectory) files, none at the top)"
        let content = [UInt8](repeating: 0x4E, count: Self.size)

        let daemon = try options.startDaemon()
        defer { daemon.stop() }
        let clients = try await (0..<Self.clients).asyncMap { _ in try await DataProtectionClient.connect(socketPath: daemon.socketPath) }
        try await clients[0].setPasscode("bench")
        let protdCreate = try await Stopwatch.time { try await create(names, content: content, clients: clients) }
        let (plain, plainCreate) = try PlainTree.create(root: options.dir + "/protd-bench-names-\(getpid())",
                                                        directories: directories, names: names, content: content)
        defer { plain.remove() }
        let threads = ProcessInfo.processInfo.activeProcessorCount
        let count = Double(names.count)
        report.add(Row(workload: label, measure: "protd create, \(Self.clients) clients x \(Self.inFlight) in flight", unit: "files/s",
                       sample: Sample(values: [count / protdCreate]),
                       note: "the workload's setup, timed once: \(shape), each written whole (durable: false) into a "
                           + "protd of its own; every row below runs on this namespace"))
        report.add(Row(workload: label, measure: "plain create, \(threads) threads", unit: "files/s",
                       sample: Sample(values: [count / plainCreate]),
                       note: "open(2) with O_CREAT | O_EXCL, write(2), close(2) into a plain tree of the same shape in \(options.dir)"))
        report.add(Row(workload: label, measure: "protd / plain create time", unit: "x", sample: Sample(values: [protdCreate / plainCreate])))

        var generator = SeededGenerator(seed: 37)
        let randomNames = (0..<lookups).map { _ in names.randomElement(using: &generator)! }
        let randomDirectories = (0..<directoryListings).map { _ in directories.randomElement(using: &generator)! }
        let randomTops = (0..<topListings).map { _ in directories.randomElement(using: &generator)! }
        let client = clients[0]
        try await lookUp(randomNames.prefix(100), client: client, plain: plain)  // warm-up, untimed

        var times = Times()
        for _ in 0..<options.repetitions {
            times.protdStat.append(try await Stopwatch.time {
                for name in randomNames { _ = try await client.file(name).attributes }
            })
            times.plainStat.append(try Self.time { plain.statEach(randomNames) })
            times.protdOpen.append(try await Stopwatch.time {
                for name in randomNames { await (try await client.file(name).open(.existing)).close() }
            })
            times.plainOpen.append(try Self.time { plain.openAndClose(randomNames) })
            times.protdDirectory.append(try await Self.timeListings(randomDirectories, expecting: Self.perDirectory) {
                try await client.list(prefix: $0 + "/").count
            })
            times.plainDirectory.append(try await Self.timeListings(randomDirectories, expecting: Self.perDirectory) { plain.list($0) })
            times.protdTop.append(try await Self.timeListings(randomTops, expecting: Self.perDirectory) {
                try await client.list(prefix: $0).count
            })
            times.plainTop.append(try await Self.timeListings(randomTops, expecting: Self.perDirectory) { plain.list(topPrefix: $0) })
            times.protdAll.append(try await Self.timeListings([""], expecting: names.count) { try await client.list(prefix: $0).count })
            times.plainAll.append(try await Self.timeListings([""], expecting: names.count) { _ in plain.listAll() })
        }
        for client in clients { await client.close() }

        let one = "d" + String(repeating: "N", count: width)
        compare(label, protd: ("stat, random name", times.protdStat), plain: ("stat(2), random name", times.plainStat),
                operations: lookups, ratio: "stat",
                note: "\(lookups) names at random, the same for both, one awaited at a time from one client: "
                    + "ProtectedFile.attributes (one request; the daemon computes the sealed path, opens the file and "
                    + "reads its header for class and size) against stat(2) of the plain path")
        compare(label, protd: ("open + close, random name", times.protdOpen),
                plain: ("open(2) + close(2), random name", times.plainOpen), operations: lookups, ratio: "open + close",
                note: "the same names: ProtectedFile.open(.existing) then Handle.close() (two requests; the open reads "
                    + "the header and unwraps the file's key) against open(2) O_RDONLY and close(2)")
        compare(label, protd: ("list(prefix: \"\(one)/\")", times.protdDirectory),
                plain: ("readdir + stat of one directory", times.plainDirectory), operations: directoryListings,
                ratio: "list of one directory",
                note: "\(directoryListings) directories of \(Self.perDirectory) files at random: list(prefix:) with the "
                    + "directory's name and a slash (the walk starts in that directory, opens each entry's name and "
                    + "reads each file's header) against opendir/readdir with fstatat(2) of each entry")
        compare(label, protd: ("list(prefix: \"\(one)\"), no slash", times.protdTop),
                plain: ("readdir top, readdir + stat \(one)", times.plainTop), operations: topListings,
                ratio: "prefix without slash",
                note: "\(topListings) directories at random, named without the slash: the prefix has no whole "
                    + "component, so the walk starts at the top and opens the sealed name of each of its "
                    + "\(directoryCount) entries before it descends into the one that matches; plain reads the top "
                    + "directory's names and lists the matching directory as above")
        compare(label, protd: ("list(prefix: \"\"), whole namespace", times.protdAll),
                plain: ("tree walk, stat of every entry", times.plainAll), operations: 1, unit: "ms", scale: 1000,
                ratio: "whole namespace",
                note: "list(prefix: \"\") once per repetition, \(names.count) entries in one answer, against a "
                    + "recursive opendir/readdir with fstatat(2) of every entry")
    }

    /// Creates `names` through `clients`, each with `inFlight` whole-file
    /// writes outstanding.
    private func create(_ names: [String], content: [UInt8], clients: [DataProtectionClient]) async throws {
        let tasks = clients.count * Self.inFlight
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                let client = clients[task % clients.count]
                group.addTask {
                    for index in stride(from: task, to: names.count, by: tasks) {
                        try await client.file(names[index]).write(content, protection: .none, durable: false)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// One stat and one open of each of `names` on both sides, untimed.
    private func lookUp(_ names: ArraySlice<String>, client: DataProtectionClient, plain: PlainTree) async throws {
        for name in names {
            _ = try await client.file(name).attributes
            await (try await client.file(name).open(.existing)).close()
        }
        guard plain.statEach(Array(names)), plain.openAndClose(Array(names)) else { throw BenchFailure("plain tree incomplete") }
    }

    /// The three rows of one operation: protd and plain per operation, and
    /// protd's time over plain's.
    private func compare(_ label: String, protd: (measure: String, seconds: [Double]), plain: (measure: String, seconds: [Double]),
                         operations: Int, unit: String = "µs/op", scale: Double = 1_000_000, ratio: String, note: String) {
        let perOperation = { (seconds: [Double]) in Sample(values: seconds.map { $0 * scale / Double(operations) }) }
        let protdSample = perOperation(protd.seconds)
        let plainSample = perOperation(plain.seconds)
        report.add(Row(workload: label, measure: "protd " + protd.measure, unit: unit, sample: protdSample, note: note))
        report.add(Row(workload: label, measure: "plain " + plain.measure, unit: unit, sample: plainSample))
        report.add(Row(workload: label, measure: "protd / plain, " + ratio, unit: "x",
                       sample: Sample(values: [protdSample.median / plainSample.median])))
    }

    /// Seconds `body` took; it answers false when an operation failed.
    private static func time(_ body: () -> Bool) throws -> Double {
        let start = ContinuousClock.now
        guard body() else { throw BenchFailure("a plain lookup failed") }
        return seconds(since: start)
    }

    /// Seconds the listings of `prefixes` took; each must find `expected` files.
    private static func timeListings(_ prefixes: [String], expecting expected: Int,
                                     _ list: (String) async throws -> Int) async throws -> Double {
        var wrong: (String, Int)?
        let elapsed = try await Stopwatch.time {
            for prefix in prefixes {
                let found = try await list(prefix)
                if found != expected { wrong = (prefix, found) }
            }
        }
        if let (prefix, found) = wrong { throw BenchFailure("listing \"\(prefix)\" found \(found) files, not \(expected)") }
        return elapsed
    }

    private static func zeroPadded(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// Seconds per repetition of each measurement.
    private struct Times {
        var protdStat: [Double] = [], plainStat: [Double] = []
        var protdOpen: [Double] = [], plainOpen: [Double] = []
        var protdDirectory: [Double] = [], plainDirectory: [Double] = []
        var protdTop: [Double] = [], plainTop: [Double] = []
        var protdAll: [Double] = [], plainAll: [Double] = []
    }
}
