import DataProtection
import Foundation
import ProtectionCore
import ProtectionTestSupport
import ProtectionWire
import Sodium

/// Sequential write then read of one large file: protd against the crypto
/// ceiling (raw libsodium, same algorithm and segment size, no I/O), the
/// I/O floor (plain files on the same file system), age, gocryptfs and
/// kernel fscrypt.
struct LargeFileWorkload {
    let options: BenchOptions
    let report: Report
    static let chunk = 1 << 20
    static let segment = 64 * 1024

    var bytes: Int { options.sizeMiB << 20 }
    /// The workload column of every row.
    var label: String { "large file \(options.sizeMiB) MiB" }
    var mebibytes: Double { Double(options.sizeMiB) }

    /// MiB/s for each timing.
    func throughput(_ sample: Sample) -> Sample { Sample(values: sample.values.map { mebibytes / $0 }) }

    func run(daemon: DaemonProcess, client: DataProtectionClient) async throws -> (write: Double, read: Double) {
        let content = [UInt8](repeating: 0x5A, count: Self.chunk)
        let chunks = bytes / Self.chunk
        // What the daemon's storage.cipher = auto picks on this CPU.
        let cipher = ContentCipher.preferred
        let idle = Memory.residentMiB(pid: daemon.pid)
        // protd and the two baselines its write targets rest on take turns.
        let protdRuns = ProtdLargeFile(daemon: daemon, client: client, content: content, chunks: chunks,
                                       prepare: prepareFreshPages)
        let floorRuns = PlainLargeFile(path: options.dir + "/protd-bench-plain-\(getpid())", content: content,
                                       chunks: chunks, overwrite: true, prepare: prepareFreshPages)
        let ageRuns = try AgeLargeFile.make(in: options.dir, content: content, chunks: chunks, report: report,
                                            prepare: prepareFreshPages)
        try await TakingTurns.run([protdRuns, floorRuns] + (ageRuns.map { [$0] } ?? []), rounds: options.repetitions)
        // Their files would hold memory through the rest of the workload.
        try await protdRuns.deleteIfPresent()
        floorRuns.remove()
        ageRuns?.remove()
        let protd = protdRun(protdRuns)
        let protdWrite = protd.write
        let protdRead = protd.read

        let (storeWrite, storeRead) = try storeInProcess(content: content, chunks: chunks, cipher: cipher)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var rates: CipherRates?
        for measured in ContentCipher.allCases where measured.isAvailable {
            let these = try cipherRates(measured, cores: cores, isDefault: measured == cipher)
            if measured == cipher { rates = these }
        }
        guard let rates else { preconditionFailure("the preferred cipher is available") }
        let plainWrite = throughput(Sample(values: floorRuns.writeSeconds))
        let plainOverwrite = throughput(Sample(values: floorRuns.overwriteSeconds))
        let plainRead = throughput(Sample(values: floorRuns.readSeconds))
        let (socketRate, socketCPU) = try SocketTransfer(bytes: bytes, chunk: Self.chunk).measure(repetitions: options.repetitions)
        let pipeline = try EssentialWritePipeline(bytes: bytes, piece: Self.chunk, batch: WireProtocol.chunkSize,
                                                  directory: options.dir, cipher: cipher).measure(repetitions: options.repetitions,
                                                                                   before: prepareFreshPages)
        let bigBatches = try EssentialWritePipeline(bytes: bytes, piece: Self.chunk, batch: 4 << 20,
                                                    directory: options.dir, cipher: cipher).measure(repetitions: options.repetitions,
                                                                                   before: prepareFreshPages)
        let floorWrite = min(rates.ceilingSeal.median, plainWrite.median)
        let floorRead = min(rates.ceilingOpen.median, plainRead.median)

        report.add(Row(workload: label, measure: "plain file write (floor)", unit: "MiB/s", sample: plainWrite,
                       note: "a new file, as protd writes one (a whole-file write goes to a new file, then rename)"))
        report.add(Row(workload: label, measure: "plain file overwrite in place", unit: "MiB/s",
                       sample: plainOverwrite,
                       note: "the same file written again, its pages already allocated: the gap to the floor is what "
                           + "new pages cost on this machine (see memory handed back to the hypervisor, under machine)"))
        report.add(Row(workload: label, measure: "plain file read (floor)", unit: "MiB/s", sample: plainRead))
        report.add(Row(workload: label, measure: "Unix socket transfer alone", unit: "MiB/s",
                       sample: socketRate,
                       note: "a socket pair with protd's send buffer, one thread writing 1 MiB pieces and one reading them"))
        report.add(Row(workload: label, measure: "Unix socket transfer CPU", unit: "ms/MiB",
                       sample: socketCPU, note: "both threads' CPU time per MiB moved"))
        report.add(Row(workload: label, measure: "write pipeline, 512 KiB batches", unit: "MiB/s",
                       sample: pipeline,
                       note: "the write's work with nothing of protd's: a socket pair; one thread reads a batch (of "
                           + "protd's chunk size) and seals its 64 KiB segments with \(cipher), another writes the previous "
                           + "batch into a new file"))
        report.add(Row(workload: label, measure: "write pipeline, 4 MiB batches", unit: "MiB/s",
                       sample: bigBatches, note: "the same, reading, sealing and writing 4 MiB at a time"))
        report.add(Row(workload: label, measure: "protd store in-process write (no socket)",
                       unit: "MiB/s", sample: storeWrite,
                       note: "ProtectedStore driven in this process with \(cipher): the daemon's data path without the "
                           + "socket and the client"))
        report.add(Row(workload: label, measure: "protd store in-process read (no socket)",
                       unit: "MiB/s", sample: storeRead))
        report.add(Row(workload: label, measure: "protd write", unit: "MiB/s", sample: protdWrite,
                       target: ">= 0.75x min(ceiling, floor) = \(Report.format(0.75 * floorWrite))",
                       met: protdWrite.median >= 0.75 * floorWrite,
                       note: "through the client library to protd, storage.cipher auto (\(cipher) here); a new file each "
                           + "time, the previous one deleted first (untimed), as the floor and the peers unlink or "
                           + "truncate theirs"))
        report.add(Row(workload: label, measure: "protd read", unit: "MiB/s", sample: protdRead,
                       target: ">= 0.75x min(ceiling, floor) = \(Report.format(0.75 * floorRead))",
                       met: protdRead.median >= 0.75 * floorRead))
        let costs = DataPathCosts(cores: cores, seal: rates.singleSeal.median, open: rates.singleOpen.median,
                                  plainWrite: plainWrite.median, plainRead: plainRead.median,
                                  socketMillisecondsPerMiB: socketCPU.median)
        let bounds = reportBounds(costs, cipher: cipher, targetWrite: 0.75 * floorWrite, targetRead: 0.75 * floorRead,
                                  reached: (protdWrite.median, protdRead.median),
                                  writeCPU: protd.writeCPU, readCPU: protd.readCPU, storeWrite: storeWrite.median,
                                  storeRead: storeRead.median, overwrite: plainOverwrite.median)
        reportPipelineBound(max(pipeline.median, bigBatches.median), target: 0.75 * floorWrite, protd: protdWrite.median)
        try await otherCiphersThroughProtd(preferred: cipher, run: protd, content: content, chunks: chunks)
        let peers = PeerContext(protdWrite: protdWrite.median, protdRead: protdRead.median, bounds: bounds, cipher: cipher)
        if let ageRuns { reportAge(peers, ageRuns) }
        try await gocryptfs(peers, content: content, chunks: chunks)
        try FscryptComparison(options: options, report: report).run(protdWrite: protdWrite.median, protdRead: protdRead.median)
        let growth = Sample(values: protd.peaks.map { $0 - idle })
        report.add(Row(workload: "memory", measure: "daemon RSS growth streaming \(options.sizeMiB) MiB", unit: "MiB",
                       sample: growth, target: "<= 16 MiB, every run", met: growth.max <= 16,
                       note: "one figure per protd write and per protd read above: the daemon's highest RSS during it "
                           + "(polled every 25 ms) less its RSS before the first; the target is checked on the max"))
        return (protdWrite.median, protdRead.median)
    }

    /// protd's throughput through the client library, with the CPU each
    /// side spent and the daemon's highest RSS during each run.
    struct ProtdRun {
        var write, read: Sample
        var writeCPU, readCPU: CPUPerMiB
        var peaks: [Double]
    }

    /// Writes then reads the large file through `client`, `repetitions`
    /// times each, with nothing taking turns.
    private func measureProtd(daemon: DaemonProcess, client: DataProtectionClient, content: [UInt8], chunks: Int)
        async throws -> ProtdRun {
        let runs = ProtdLargeFile(daemon: daemon, client: client, content: content, chunks: chunks,
                                  prepare: prepareFreshPages)
        try await TakingTurns.run([runs], rounds: options.repetitions)
        try await runs.deleteIfPresent()
        return protdRun(runs)
    }

    /// `runs`' figures: MiB/s, CPU per MiB, peaks.
    private func protdRun(_ runs: ProtdLargeFile) -> ProtdRun {
        let moved = mebibytes * Double(runs.writeSeconds.count)
        return ProtdRun(write: throughput(Sample(values: runs.writeSeconds)), read: throughput(Sample(values: runs.readSeconds)),
                        writeCPU: runs.writeCPU.millisecondsPerMiB(moved), readCPU: runs.readCPU.millisecondsPerMiB(moved),
                        peaks: runs.peaks)
    }

    /// The same write and read through a second protd set to each other
    /// cipher this CPU runs, so the choice of default rests on protd's own
    /// throughput here, not only on the ciphers' raw speed.
    private func otherCiphersThroughProtd(preferred: ContentCipher, run: ProtdRun, content: [UInt8], chunks: Int)
        async throws {
        for other in ContentCipher.allCases where other != preferred {
            guard other.isAvailable else {
                report.skip("protd with \(other): it needs \(other.unmetRequirement ?? "what this machine lacks")")
                continue
            }
            try await otherCipherThroughProtd(other, preferred: preferred, run: run, content: content, chunks: chunks)
        }
    }

    /// One other cipher's protd write and read, as ratios to the default's.
    private func otherCipherThroughProtd(_ other: ContentCipher, preferred: ContentCipher, run: ProtdRun,
                                         content: [UInt8], chunks: Int) async throws {
        let daemon = try options.startDaemon(cipher: other.description)
        defer { daemon.stop() }
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let alternative = try await measureProtd(daemon: daemon, client: client, content: content, chunks: chunks)
        await client.close()
        let note = "a second protd, set to storage.cipher \(other), right after the first"
        report.add(Row(workload: label, measure: "protd write, \(other)", unit: "MiB/s", sample: alternative.write, note: note))
        report.add(Row(workload: label, measure: "protd read, \(other)", unit: "MiB/s", sample: alternative.read))
        report.add(Row(workload: label, measure: "protd write, \(preferred) / \(other)", unit: "x",
                       sample: Sample(values: [run.write.median / alternative.write.median]),
                       note: "the default (auto) is the fastest cipher this machine runs; docs/DESIGN.md, section Ciphers"))
        report.add(Row(workload: label, measure: "protd read, \(preferred) / \(other)", unit: "x",
                       sample: Sample(values: [run.read.median / alternative.read.median])))
        // CPU time comes in clock ticks: a quick run's few MiB may show none.
        guard alternative.writeCPU.total > 0, alternative.readCPU.total > 0 else { return }
        report.add(Row(workload: label, measure: "protd CPU per MiB written, \(preferred) / \(other)", unit: "x",
                       sample: Sample(values: [run.writeCPU.total / alternative.writeCPU.total]),
                       note: "daemon and client together"))
        report.add(Row(workload: label, measure: "protd CPU per MiB read, \(preferred) / \(other)", unit: "x",
                       sample: Sample(values: [run.readCPU.total / alternative.readCPU.total])))
    }

    /// Reports what `costs` allow against the targets, with what protd's
    /// own runs spent and `reached` (their median write and read). Returns
    /// the two bounds through the socket, for the peers' ratio targets.
    private func reportBounds(_ costs: DataPathCosts, cipher: ContentCipher, targetWrite: Double, targetRead: Double,
                              reached: (write: Double, read: Double),
                              writeCPU: CPUPerMiB, readCPU: CPUPerMiB, storeWrite: Double,
                              storeRead: Double, overwrite: Double) -> (write: Double, read: Double) {
        let f = Report.format
        let socket = "moving it across the socket at \(f(costs.socketMillisecondsPerMiB)) ms of CPU per MiB"
        func explain(_ name: String, _ work: String, minimum: Double, alone: Double, target: Double,
                     reached: Double, spent: CPUPerMiB, inProcess: Double, why: String = "") {
            let bound = costs.throughput(millisecondsPerMiB: minimum)
            // The parts are measured each alone; together they can cost less.
            let passed = reached > bound
                ? ". protd reached \(f(reached)) MiB/s, above this estimate: its parts, each measured alone, cost "
                    + "more here than they do together, so it bounds nothing in this run"
                : ""
            // CPU time comes in clock ticks: a quick run's few MiB may show none.
            let ownCap = spent.total > 0
                ? " (together \(f(spent.total)): at that cost \(costs.cores) cores allow protd at most "
                    + "\(f(costs.throughput(millisecondsPerMiB: spent.total))) MiB/s, however well its stages overlap)"
                : ""
            report.bound("\(name): \(work) and \(socket) add up to at least \(f(minimum)) ms of CPU per MiB, so "
                         + "\(costs.cores) cores allow at most \(f(bound)) MiB/s through the socket with a free client "
                         + "and daemon (\(f(alone)) without the socket). The target asks \(f(target)) "
                         + "(\(f(100 * target / bound))% of that bound). protd's runs used \(f(spent.daemon)) ms of CPU "
                         + "per MiB in the daemon and \(f(spent.client)) in the client\(ownCap); the daemon's data path "
                         + "in-process, with no socket, reaches \(f(inProcess)) MiB/s\(passed)\(why)")
        }
        explain("large write", "sealing (\(cipher)) at \(f(costs.seal)) MiB/s per core, writing a new file at "
                + "\(f(costs.plainWrite)) MiB/s (\(f(overwrite)) over pages already allocated)",
                minimum: costs.writeMilliseconds, alone: costs.writeWithoutSocket, target: targetWrite,
                reached: reached.write, spent: writeCPU, inProcess: storeWrite)
        explain("large read", "opening (\(cipher)) at \(f(costs.open)) MiB/s per core, reading at \(f(costs.plainRead)) MiB/s",
                minimum: costs.readMilliseconds, alone: costs.readWithoutSocket, target: targetRead,
                reached: reached.read, spent: readCPU, inProcess: storeRead,
                why: ". protd cannot do without the socket: the daemon keeps the keys, so every byte it opens must "
                    + "cross to the client; a ring of shared memory in its place (docs/DESIGN.md, Reads) came near the "
                    + "target only by letting the client see plaintext before its tag is checked")
        return (costs.throughput(millisecondsPerMiB: costs.writeMilliseconds),
                costs.throughput(millisecondsPerMiB: costs.readMilliseconds))
    }

    /// Reports the large write target against what the essential work
    /// reaches through a socket with nothing of protd's around it.
    private func reportPipelineBound(_ pipeline: Double, target: Double, protd: Double) {
        let f = Report.format
        let reach = target > pipeline ? "above what the work itself reaches here" : "within what the work itself reaches"
        report.bound("large write, in practice: the same work with nothing of protd's around it (a socket pair, each "
                     + "batch read straight into a buffer and sealed on one thread while another writes the previous "
                     + "batch into a new file; the faster of 512 KiB and 4 MiB batches) reaches \(f(pipeline)) MiB/s. "
                     + "The target asks \(f(target)) "
                     + "(\(f(100 * target / pipeline))% of it, \(reach)); protd reached \(f(protd)) "
                     + "(\(f(100 * protd / pipeline))% of it)")
    }

    /// Explains a ratio target against a peer that protd missed: out of
    /// reach when the peer is so fast here that `multiple` times its rate
    /// passes `bound`, else within reach and simply not met.
    private func explainPeerTarget(_ target: String, multiple: Double, peer: String, peerRate: Double,
                                   protdRate: Double, bound: Double, boundName: String, cipher: ContentCipher) {
        let wanted = multiple * peerRate
        guard protdRate < wanted else { return }
        let f = Report.format
        let times = multiple == multiple.rounded() ? "\(Int(multiple))" : "\(multiple)"
        let reach = wanted > bound ? "above" : "not out of reach: within"
        report.bound("\(target): \(peer) ran at \(f(peerRate)) MiB/s in this run, so \(times)x is "
                     + "\(f(wanted)), \(reach) the \(f(bound)) MiB/s that the \(boundName) bound allows protd's "
                     + "format through its socket (the CPU that \(cipher), the plain file system and the socket "
                     + "transfer take, over every core) here; protd reached \(f(protdRate))")
    }

    /// The daemon's store (format, crypto, files) in this process, in the
    /// same 1 MiB pieces: separates the data path's cost from the socket's.
    private func storeInProcess(content: [UInt8], chunks: Int, cipher: ContentCipher) throws -> (Sample, Sample) {
        let directory = try TemporaryDirectory("store", in: options.dir)
        defer { directory.remove() }
        let store = try ProtectedStore(configuration: StoreConfiguration(stateDirectory: directory.path, passcodeCost: .minimum,
                                                                         cipher: cipher),
                                       clock: ManualWallClock())
        defer { store.shutdown() }
        let name = try FileName("large")
        let namespace = Namespace(uid: 0)
        var write: [Double] = []
        var read: [Double] = []
        var buffer = [UInt8](repeating: 0, count: Self.chunk)
        for _ in 0..<options.repetitions {
            // A new file each time, as for protd through the socket.
            do {
                try store.delete(name, in: namespace)
            } catch let error as ProtectionError where error.code == .notFound {
            }
            try prepareFreshPages()
            var start = ContinuousClock.now
            let pending = try store.beginWrite(to: name, in: namespace, durable: false)
            for _ in 0..<chunks { try pending.append(content) }
            try pending.commit()
            write.append(mebibytes / seconds(since: start))
            start = ContinuousClock.now
            let handle = try store.open(name, in: namespace, mode: .existing)
            var offset = 0
            while true {
                let count = try buffer.withUnsafeMutableBytes { try handle.read(offset: offset, count: Self.chunk, into: $0) }
                if count == 0 { break }
                offset += count
            }
            handle.close()
            precondition(offset == bytes, "read \(offset) of \(bytes) bytes")
            read.append(mebibytes / seconds(since: start))
        }
        return (Sample(values: write), Sample(values: read))
    }

    /// Before a timed write: see `FreshPages`.
    private func prepareFreshPages() throws { try FreshPages.prepare(bytes: 2 * bytes) }

    /// One cipher's in-process speed over the same bytes in 64 KiB
    /// segments, through the same `RandomNonceAEAD` protd's files use.
    struct CipherRates {
        var singleSeal, singleOpen, ceilingSeal, ceilingOpen: Sample
    }

    /// Measures and reports `cipher` on 1 core and on every core; for the
    /// default cipher the latter is the crypto ceiling.
    private func cipherRates(_ cipher: ContentCipher, cores: Int, isDefault: Bool) throws -> CipherRates {
        let (singleSeal, singleOpen) = try cryptoRates(cipher, threads: 1)
        let (ceilingSeal, ceilingOpen) = try cryptoRates(cipher, threads: cores)
        let ceiling = isDefault ? " (ceiling)" : ""
        let construction = cipher == .aes256GCM ? "; with a subkey per segment, as in protd's files" : ""
        report.add(Row(workload: label, measure: "raw libsodium \(cipher) seal, 1 core", unit: "MiB/s", sample: singleSeal,
                       note: (isDefault ? "the cipher protd's storage.cipher auto picks on this CPU" : "") + construction))
        report.add(Row(workload: label, measure: "raw libsodium \(cipher) open, 1 core", unit: "MiB/s", sample: singleOpen))
        report.add(Row(workload: label, measure: "raw libsodium \(cipher) seal, \(cores) cores\(ceiling)", unit: "MiB/s",
                       sample: ceilingSeal, note: "the most this cipher seals here; protd seals a request's segments on its serving thread, "
                           + "one connection's on one core"))
        report.add(Row(workload: label, measure: "raw libsodium \(cipher) open, \(cores) cores\(ceiling)", unit: "MiB/s",
                       sample: ceilingOpen))
        return CipherRates(singleSeal: singleSeal, singleOpen: singleOpen, ceilingSeal: ceilingSeal, ceilingOpen: ceilingOpen)
    }

    /// `cipher` over the same bytes in 64 KiB segments, on `threads`
    /// threads at once, each taking every `threads`-th segment: on every
    /// core, the most the cipher does here (protd itself seals one
    /// request's segments on one thread).
    private func cryptoRates(_ cipher: ContentCipher, threads: Int) throws -> (Sample, Sample) {
        let aead = cipher.aead
        let key = try SecretBytes.random(count: 32)
        let nonce = try SecureRandom.bytes(aead.nonceByteCount)
        let ad = [UInt8](repeating: 1, count: 25)
        let segments = bytes / Self.segment
        let sealedOnce: [UInt8] = try {
            var sealed = [UInt8](repeating: 0, count: Self.segment + aead.tagByteCount)
            let plain = [UInt8](repeating: 0x5A, count: Self.segment)
            try plain.withUnsafeBytes { p in try ad.withUnsafeBytes { a in try nonce.withUnsafeBytes { n in
                try sealed.withUnsafeMutableBytes { try aead.seal(p, additionalData: a, nonce: n, key: key, into: $0) }
            } } }
            return sealed
        }()
        /// Seconds for every thread to finish its share of the segments.
        func timed(sealing: Bool) -> Double {
            let start = ContinuousClock.now
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                var input = sealing ? [UInt8](repeating: 0x5A, count: Self.segment) : sealedOnce
                var output = [UInt8](repeating: 0, count: sealing ? Self.segment + aead.tagByteCount : Self.segment)
                // Held open across segments, as protd's FileKey.holdingAccess does.
                _ = try! key.whileReadable {
                    for _ in Swift.stride(from: thread, to: segments, by: threads) {
                        input.withUnsafeBytes { i in ad.withUnsafeBytes { a in nonce.withUnsafeBytes { n in
                            output.withUnsafeMutableBytes { o in
                                if sealing {
                                    try! aead.seal(i, additionalData: a, nonce: n, key: key, into: o)
                                } else {
                                    try! aead.open(i, additionalData: a, nonce: n, key: key, into: o)
                                }
                            }
                        } } }
                    }
                }
                input.removeAll()
            }
            return seconds(since: start)
        }
        var seal: [Double] = []
        var open: [Double] = []
        for _ in 0..<options.repetitions {
            seal.append(mebibytes / timed(sealing: true))
            open.append(mebibytes / timed(sealing: false))
        }
        return (Sample(values: seal), Sample(values: open))
    }

    /// gocryptfs (FUSE) with the same 1 MiB writes and reads.
    private func gocryptfs(_ peers: PeerContext, content: [UInt8], chunks: Int) async throws {
        guard let mount = GocryptfsMount.mountOrSkip(in: options.dir, report: report, what: "large file on gocryptfs") else {
            return
        }
        defer { mount.unmount() }
        let runs = PlainLargeFile(path: mount.mountPoint + "/large", content: content, chunks: chunks,
                                  prepare: prepareFreshPages)
        try await TakingTurns.run([runs], rounds: options.repetitions)
        runs.remove()
        let write = throughput(Sample(values: runs.writeSeconds))
        let read = throughput(Sample(values: runs.readSeconds))
        report.add(Row(workload: label, measure: "gocryptfs write", unit: "MiB/s", sample: write))
        report.add(Row(workload: label, measure: "gocryptfs read", unit: "MiB/s", sample: read,
                       note: "read back through FUSE right after writing; gocryptfs decrypts on every read"))
        reportRatios(peers, peer: "gocryptfs", multiple: 1.5, write: ("gocryptfs write", write.median),
                     read: ("gocryptfs read", read.median))
    }

    /// What the peers are compared with: protd's medians, its bounds
    /// through the socket, and the cipher they were measured with.
    struct PeerContext {
        let protdWrite, protdRead: Double
        let bounds: (write: Double, read: Double)
        let cipher: ContentCipher
    }

    /// protd's write and read as multiples of a peer's, each with the
    /// target `multiple`, and for each one missed, whether the bound put it out of reach.
    private func reportRatios(_ peers: PeerContext, peer: String, multiple: Double, write: (measure: String, rate: Double),
                              read: (measure: String, rate: Double)) {
        let times = multiple == multiple.rounded() ? "\(Int(multiple))" : "\(multiple)"
        for (side, protd, measured, bound) in [("write", peers.protdWrite, write, peers.bounds.write),
                                               ("read", peers.protdRead, read, peers.bounds.read)] {
            report.add(Row(workload: label, measure: "protd \(side) / \(measured.measure)", unit: "x",
                           sample: Sample(values: [protd / measured.rate]), target: ">= \(times)x",
                           met: protd / measured.rate >= multiple))
            explainPeerTarget("\(side) >= \(times)x \(peer)", multiple: multiple, peer: measured.measure,
                              peerRate: measured.rate, protdRate: protd, bound: bound, boundName: "large \(side)",
                              cipher: peers.cipher)
        }
    }

    /// age's encrypt (write) and decrypt (read) rows, and protd's ratios to them.
    private func reportAge(_ peers: PeerContext, _ runs: AgeLargeFile) {
        let encrypt = throughput(Sample(values: runs.encryptSeconds))
        let decrypt = throughput(Sample(values: runs.decryptSeconds))
        report.add(Row(workload: label, measure: "age encrypt", unit: "MiB/s", sample: encrypt))
        report.add(Row(workload: label, measure: "age decrypt", unit: "MiB/s", sample: decrypt))
        reportRatios(peers, peer: "age", multiple: 1.5, write: ("age encrypt", encrypt.median),
                     read: ("age decrypt", decrypt.median))
    }
}

/// The work every protd write must do is sealing each byte, writing it and
/// moving it across the socket; a read, reading, opening and moving. All of
/// it runs on the same cores, so throughput is at most
/// cores / (CPU time per MiB of that work), however free the rest is.
struct DataPathCosts {
    let cores: Int
    /// MiB/s on one core.
    let seal, open: Double
    /// MiB/s of plain file I/O.
    let plainWrite, plainRead: Double
    let socketMillisecondsPerMiB: Double

    var writeMilliseconds: Double { 1000 / seal + 1000 / plainWrite + socketMillisecondsPerMiB }
    var readMilliseconds: Double { 1000 / open + 1000 / plainRead + socketMillisecondsPerMiB }
    var writeWithoutSocket: Double { throughput(millisecondsPerMiB: writeMilliseconds - socketMillisecondsPerMiB) }
    var readWithoutSocket: Double { throughput(millisecondsPerMiB: readMilliseconds - socketMillisecondsPerMiB) }

    /// MiB/s that `cores` allow for work costing `millisecondsPerMiB`.
    func throughput(millisecondsPerMiB: Double) -> Double { Double(cores) * 1000 / millisecondsPerMiB }
}

/// The same chunk `count` times, produced lazily.
struct RepeatedChunks: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    let chunk: [UInt8]
    let count: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        let chunk: [UInt8]
        var remaining: Int
        mutating func next() async -> [UInt8]? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunk: chunk, remaining: count) }
}
