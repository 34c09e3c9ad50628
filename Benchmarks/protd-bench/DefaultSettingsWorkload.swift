import DataProtection
import Foundation
import ProtectionTestSupport

/// The large file as a user gets it without tuning: durable writes (the
/// client's default) to a daemon whose state directory is on a disk
/// (`--disk-dir`), against plain files written and fsynced there. The
/// other large-file rows run on `--dir` (a tmpfs by default) without fsync.
struct DefaultSettingsWorkload {
    let options: BenchOptions
    let report: Report

    /// 256 MiB, less with a smaller --size-mib (--quick).
    var fileMiB: Int { min(options.sizeMiB, 256) }

    func run() async throws {
        let daemon = try options.startDaemon(in: options.diskDir)
        defer { daemon.stop() }
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let content = [UInt8](repeating: 0x5A, count: LargeFileWorkload.chunk)
        let chunks = (fileMiB << 20) / LargeFileWorkload.chunk
        let protd = ProtdLargeFile(daemon: daemon, client: client, content: content, chunks: chunks, durable: true,
                                   prepare: {})
        let plain = PlainLargeFile(path: options.diskDir + "/protd-bench-default-\(getpid())", content: content,
                                   chunks: chunks, durable: true, prepare: {})
        try await TakingTurns.run([protd, plain], rounds: options.repetitions)
        try await protd.deleteIfPresent()
        plain.remove()
        await client.close()

        let label = "large file \(fileMiB) MiB, default settings (durable, on \(options.diskDir))"
        let rate = { (seconds: [Double]) in Sample(values: seconds.map { Double(self.fileMiB) / $0 }) }
        let (protdWrite, protdRead) = (rate(protd.writeSeconds), rate(protd.readSeconds))
        let (plainWrite, plainRead) = (rate(plain.writeSeconds), rate(plain.readSeconds))
        report.add(Row(workload: label, measure: "plain file write + fsync", unit: "MiB/s", sample: plainWrite,
                       note: "a new file, 1 MiB writes, one fsync at the end"))
        report.add(Row(workload: label, measure: "plain file read", unit: "MiB/s", sample: plainRead))
        report.add(Row(workload: label, measure: "protd write, durable", unit: "MiB/s", sample: protdWrite,
                       note: "write(contentsOf:) with the default durable: true; storage.cipher auto"))
        report.add(Row(workload: label, measure: "protd read", unit: "MiB/s", sample: protdRead))
        report.add(Row(workload: label, measure: "protd write / plain write + fsync", unit: "x",
                       sample: Sample(values: [protdWrite.median / plainWrite.median])))
        report.add(Row(workload: label, measure: "protd read / plain read", unit: "x",
                       sample: Sample(values: [protdRead.median / plainRead.median])))
    }
}
