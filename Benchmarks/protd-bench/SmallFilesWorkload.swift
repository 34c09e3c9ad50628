import DataProtection
import Foundation
import ProtectionTestSupport

/// Many 4 KiB files written then read, by 1 and by 8 concurrent clients,
/// with and without durability, against plain files (temp + rename).
struct SmallFilesWorkload {
    let options: BenchOptions
    let report: Report
    static let size = 4096

    /// The rows without fsync run against `daemon` in `--dir`; the fsync
    /// rows against a second daemon, and plain files, in `--disk-dir`,
    /// because fsync on tmpfs returns at once and would compare nothing.
    func run(daemon: DaemonProcess) async throws {
        try await run(daemon: daemon, directory: options.dir, durable: false)
        let diskDaemon = try DaemonProcess(gracePeriodSeconds: 30, logLevel: "warning", parentDirectory: options.diskDir)
        defer { diskDaemon.stop() }
        try await run(daemon: diskDaemon, directory: options.diskDir, durable: true)
    }

    private func run(daemon: DaemonProcess, directory: String, durable: Bool) async throws {
        let content = [UInt8](repeating: 0x33, count: Self.size)
        for clients in [1, 8] {
            let label = "small files \(options.files) x 4 KiB, \(clients) client\(clients == 1 ? "" : "s")"
                + (durable ? ", fsync, on \(directory)" : "")
            let connections = try await (0..<clients).asyncMap { _ in try await DataProtectionClient.connect(socketPath: daemon.socketPath) }
            let perClient = options.files / clients
            let write = try await Stopwatch.sample(options.repetitions) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, client) in connections.enumerated() {
                        group.addTask {
                            for file in 0..<perClient {
                                try await client.file("small/\(index)/\(file)").write(content, protection: .completeUntilFirstUserAuthentication, durable: durable)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let read = try await Stopwatch.sample(options.repetitions) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, client) in connections.enumerated() {
                        group.addTask {
                            for file in 0..<perClient { _ = try await client.file("small/\(index)/\(file)").read() }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            for client in connections { await client.close() }
            let files = Double(perClient * clients)
            let writeRate = Sample(values: write.values.map { files / $0 })
            let readRate = Sample(values: read.values.map { files / $0 })
            let plain = try plainFiles(base: directory + "/protd-bench-small-\(getpid())", content: content,
                                       threads: clients, durable: durable)
            report.add(Row(workload: label, measure: "plain temp+rename write", unit: "files/s", sample: plain.write))
            report.add(Row(workload: label, measure: "plain read", unit: "files/s", sample: plain.read))
            let target = durable && clients == 8 ? ">= 0.8x plain with fsync" : ""
            report.add(Row(workload: label, measure: "protd write", unit: "files/s", sample: writeRate, target: target,
                           met: target.isEmpty ? nil : writeRate.median >= 0.8 * plain.write.median))
            report.add(Row(workload: label, measure: "protd read", unit: "files/s", sample: readRate))
            try compareWithGocryptfs(label: label, in: directory, clients: clients, durable: durable,
                                     protd: (writeRate.median, readRate.median), content: content)
        }
    }

    /// The same load on gocryptfs, mounted in `directory`, as a baseline
    /// for every row; the target (1.5x its operations per second) is
    /// checked with 8 clients without fsync, on the writes and the reads.
    private func compareWithGocryptfs(label: String, in directory: String, clients: Int, durable: Bool,
                                      protd: (write: Double, read: Double), content: [UInt8]) throws {
        guard let mount = GocryptfsMount.mountOrSkip(in: directory, report: report, what: "small files on gocryptfs") else {
            return
        }
        defer { mount.unmount() }
        let peer = try plainFiles(base: mount.mountPoint + "/small", content: content, threads: clients, durable: durable)
        report.add(Row(workload: label, measure: "gocryptfs temp+rename write", unit: "files/s", sample: peer.write))
        report.add(Row(workload: label, measure: "gocryptfs read", unit: "files/s", sample: peer.read))
        let targeted = clients == 8 && !durable
        for (operation, rate, peerRate) in [("write", protd.write, peer.write.median), ("read", protd.read, peer.read.median)] {
            report.add(Row(workload: label, measure: "protd \(operation) / gocryptfs \(operation)", unit: "x",
                           sample: Sample(values: [rate / peerRate]), target: targeted ? ">= 1.5x" : "",
                           met: targeted ? rate / peerRate >= 1.5 : nil))
        }
    }

    /// Plain files with the same concurrency: write to a temporary name,
    /// optionally fsync, rename; then read each back.
    private func plainFiles(base: String, content: [UInt8], threads: Int, durable: Bool) throws -> (write: Sample, read: Sample) {
        defer { try? FileManager.default.removeItem(atPath: base) }
        let perThread = options.files / threads
        for thread in 0..<threads { try FileManager.default.createDirectory(atPath: "\(base)/\(thread)", withIntermediateDirectories: true) }
        var write: [Double] = []
        var read: [Double] = []
        for _ in 0..<options.repetitions {
            let start = ContinuousClock.now
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for file in 0..<perThread {
                    let path = "\(base)/\(thread)/\(file)"
                    let fd = open(path + ".tmp", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                    _ = content.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                    if durable { fsync(fd) }
                    close(fd)
                    rename(path + ".tmp", path)
                    if durable {
                        let directory = open("\(base)/\(thread)", O_RDONLY | O_DIRECTORY)
                        fsync(directory)
                        close(directory)
                    }
                }
            }
            write.append(Double(perThread * threads) / seconds(since: start))
            let readStart = ContinuousClock.now
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                var buffer = [UInt8](repeating: 0, count: Self.size)
                for file in 0..<perThread {
                    let fd = open("\(base)/\(thread)/\(file)", O_RDONLY)
                    _ = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                    close(fd)
                }
            }
            read.append(Double(perThread * threads) / seconds(since: readStart))
        }
        return (Sample(values: write), Sample(values: read))
    }
}

extension Sequence {
    /// `map` with an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
