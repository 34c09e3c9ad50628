import DataProtection
import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport

/// Overwrites inside one existing file through a `ProtectedFile.Handle`
/// (`write(_:at:)`): random 4 KiB writes, then one sequential pass of
/// 1 MiB writes, each against plain `pwrite` of the same sizes at the same
/// offsets in a plain file on the same file system.
struct HandleOverwriteWorkload {
    let options: BenchOptions
    let report: Report
    static let page = 4096
    static let piece = 1 << 20
    /// Random writes per repetition (at most one per 4 KiB of the file).
    /// Each rewrites only the segment it falls in, so its cost does not
    /// depend on the file's size.
    static let randomWrites = 1024
    /// The goal: random handle overwrites take at most this many times as long as plain pwrite.
    static let randomTarget = 10.0

    /// The file: 256 MiB, less with a smaller --size-mib (--quick).
    var fileMiB: Int { min(options.sizeMiB, 256) }
    var label: String { "handle overwrites in a \(fileMiB) MiB file" }

    func run(client: DataProtectionClient) async throws {
        let bytes = fileMiB << 20
        let content = [UInt8](repeating: 0x6B, count: Self.piece)
        let file = client.file("overwrites")
        _ = try await file.write(contentsOf: RepeatedChunks(chunk: content, count: bytes / Self.piece),
                                 protection: .completeUntilFirstUserAuthentication, durable: false)
        let plain = try PlainFile(path: options.dir + "/protd-bench-overwrites-\(getpid())", bytes: bytes, content: content)
        defer { plain.remove() }
        let handle = try await file.open(.existing)

        var generator = SeededGenerator(seed: 40)
        let count = min(Self.randomWrites, bytes / Self.page)
        let offsets = (0..<count).map { _ in Int.random(in: 0..<(bytes / Self.page), using: &generator) * Self.page }
        let page = Array(content[..<Self.page])
        var protdRandom: [Double] = []
        var plainRandom: [Double] = []
        var protdSequential: [Double] = []
        var plainSequential: [Double] = []
        var protdRoundTrip: [Double] = []
        var socketRoundTrip: [Double] = []
        var segmentRewrite: [Double] = []
        for _ in 0..<options.repetitions {
            protdRandom.append(try await Stopwatch.time {
                for offset in offsets { _ = try await handle.write(page, at: UInt64(offset)) }
            })
            plainRandom.append(plain.timedWrites(page, at: offsets))
            protdSequential.append(try await Stopwatch.time {
                for offset in stride(from: 0, to: bytes, by: Self.piece) { _ = try await handle.write(content, at: UInt64(offset)) }
            })
            plainSequential.append(plain.timedWrites(content, at: Array(stride(from: 0, to: bytes, by: Self.piece))))
            protdRoundTrip.append(try await Stopwatch.time {
                for _ in 0..<count { _ = try await handle.size() }
            } / Double(count))
            socketRoundTrip.append(try OverwriteFloors.socketRoundTrip(count: count))
            segmentRewrite.append(try OverwriteFloors.segmentRewrite(.preferred, count: count))
        }
        await handle.close()
        try await file.delete()

        let writesPerSecond = { (seconds: [Double]) in Sample(values: seconds.map { Double(count) / $0 }) }
        let mebibytesPerSecond = { (seconds: [Double]) in Sample(values: seconds.map { Double(fileMiB) / $0 }) }
        let randomRatio = Sample(values: [median(protdRandom) / median(plainRandom)])
        report.add(Row(workload: label, measure: "plain pwrite, random 4 KiB", unit: "writes/s", sample: writesPerSecond(plainRandom),
                       note: "\(count) writes at random 4 KiB-aligned offsets, the same for both, no fsync"))
        report.add(Row(workload: label, measure: "protd handle write, random 4 KiB", unit: "writes/s",
                       sample: writesPerSecond(protdRandom),
                       note: "ProtectedFile.Handle.write(_:at:), one awaited at a time; each rewrites the 64 KiB segment it falls in"))
        report.add(Row(workload: label, measure: "protd handle / plain pwrite time, random 4 KiB", unit: "x", sample: randomRatio,
                       target: "<= \(Int(Self.randomTarget))x", met: randomRatio.median <= Self.randomTarget))
        let microseconds = { (seconds: [Double]) in Sample(values: seconds.map { 1e6 * $0 }) }
        report.add(Row(workload: label, measure: "protd handle size(), round trip", unit: "µs",
                       sample: microseconds(protdRoundTrip),
                       note: "ProtectedFile.Handle.size(), one awaited at a time: a handle call with no crypto and no file I/O"))
        report.add(Row(workload: label, measure: "Unix socket round trip (floor)", unit: "µs", sample: microseconds(socketRoundTrip),
                       note: "64 bytes to a thread that echoes them over a socket pair, nothing of protd's: what any "
                           + "request to a process that keeps the keys costs at the least"))
        report.add(Row(workload: label, measure: "open and seal one 64 KiB segment (floor)", unit: "µs",
                       sample: microseconds(segmentRewrite),
                       note: "raw libsodium \(ContentCipher.preferred), one core, nothing of protd's: the crypto a 4 KiB "
                           + "write into a 64 KiB segment needs at the least"))
        explainRandomTarget(plain: median(plainRandom) / Double(count), protd: median(protdRandom) / Double(count),
                            socket: median(socketRoundTrip), crypto: median(segmentRewrite))
        report.add(Row(workload: label, measure: "plain pwrite, sequential 1 MiB", unit: "MiB/s",
                       sample: mebibytesPerSecond(plainSequential), note: "the whole file overwritten in place, front to back"))
        report.add(Row(workload: label, measure: "protd handle write, sequential 1 MiB", unit: "MiB/s",
                       sample: mebibytesPerSecond(protdSequential)))
        report.add(Row(workload: label, measure: "protd handle / plain pwrite time, sequential 1 MiB", unit: "x",
                       sample: Sample(values: [median(protdSequential) / median(plainSequential)])))
    }

    private func median(_ values: [Double]) -> Double { Sample(values: values).median }

    /// When the random target is missed: how far its two floors alone
    /// (the round trip and the segment's crypto, each per write) already are
    /// from it, in multiples of a plain 4 KiB pwrite.
    private func explainRandomTarget(plain: Double, protd: Double, socket: Double, crypto: Double) {
        guard protd / plain > Self.randomTarget else { return }
        let f = { (seconds: Double) in String(format: "%.1f", 1e6 * seconds) }
        let x = { (seconds: Double) in String(format: "%.0f", seconds / plain) }
        let floor = socket + crypto
        report.bound("random 4 KiB overwrite <= \(Int(Self.randomTarget))x pwrite: a plain 4 KiB pwrite takes \(f(plain)) µs, so "
                     + "the target allows \(f(Self.randomTarget * plain)) µs per write. A Unix socket round trip alone takes "
                     + "\(f(socket)) µs (\(x(socket))x) and opening and sealing the 64 KiB segment alone \(f(crypto)) µs "
                     + "(\(x(crypto))x): together \(f(floor)) µs (\(x(floor))x), out of reach of any design that keeps "
                     + "the keys in a daemon and 64 KiB segments. protd took \(f(protd)) µs (\(x(protd))x)")
    }
}

/// A plain file of `bytes` bytes to overwrite with `pwrite`.
private struct PlainFile {
    let path: String
    let descriptor: Int32

    init(path: String, bytes: Int, content: [UInt8]) throws {
        self.path = path
        descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw BenchFailure("cannot create \(path): errno \(errno)") }
        for offset in stride(from: 0, to: bytes, by: content.count) {
            _ = content.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
        }
    }

    /// Seconds to write `data` at each of `offsets`.
    func timedWrites(_ data: [UInt8], at offsets: [Int]) -> Double {
        let start = ContinuousClock.now
        data.withUnsafeBytes { bytes in
            for offset in offsets { _ = pwrite(descriptor, bytes.baseAddress, bytes.count, off_t(offset)) }
        }
        return seconds(since: start)
    }

    func remove() {
        close(descriptor)
        unlink(path)
    }
}
