import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

@Suite("Large files stream through bounded memory", .serialized)
struct StreamingEndToEndTests {
    static let size = 256 << 20
    static let chunk = 1 << 20

    /// Deterministic content for chunk `index`.
    static func chunk(_ index: Int) -> [UInt8] {
        [UInt8](repeating: UInt8(truncatingIfNeeded: index &* 31 &+ 7), count: chunk)
    }

    @Test("a 256 MiB file written and read back through the streaming API keeps both sides' RSS growth under 64 MiB")
    func largeFileBoundedMemory() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("warmup").write([UInt8](repeating: 0, count: 4 << 20), protection: .none)
        _ = try await client.file("warmup").read()
        let daemonBefore = try #require(daemon.residentKiB)
        let clientBefore = try #require(DaemonProcess.residentKiB(pid: getpid()))
        let count = Self.size / Self.chunk
        let daemonPID = daemon.pid
        let sampler = Task {
            var peaks = (daemon: 0, client: 0)
            while !Task.isCancelled {
                peaks.daemon = max(peaks.daemon, DaemonProcess.residentKiB(pid: daemonPID) ?? 0)
                peaks.client = max(peaks.client, DaemonProcess.residentKiB(pid: getpid()) ?? 0)
                try? await Task.sleep(for: .milliseconds(20))
            }
            return peaks
        }
        try await client.file("big").write(contentsOf: BoundedChunks(count: count), protection: .completeUntilFirstUserAuthentication)
        var index = 0
        var pending: [UInt8] = []
        for try await piece in client.file("big").readChunks() {
            pending += piece
            while pending.count >= Self.chunk {
                #expect(Array(pending.prefix(Self.chunk)) == Self.chunk(index), "chunk \(index) differs")
                pending.removeFirst(Self.chunk)
                index += 1
            }
        }
        sampler.cancel()
        let (peakDaemon, peakClient) = await sampler.value
        #expect(index == count && pending.isEmpty)
        let daemonGrowth = (peakDaemon - daemonBefore) / 1024
        let clientGrowth = (peakClient - clientBefore) / 1024
        print("256 MiB stream: daemon RSS growth \(daemonGrowth) MiB, client RSS growth \(clientGrowth) MiB")
        #expect(daemonGrowth < 64)
        #expect(clientGrowth < 64)
        #expect(try await client.file("big").attributes.size == UInt64(Self.size))
    }

    @Test("reads come in 512 KiB chunks under the default frame limit and in 256 KiB ones under the smallest",
          arguments: [(nil, 512 * 1024), (266_240, 256 * 1024)])
    func chunksFollowTheFrameLimit(frameLimit: Int?, expectedChunk: Int) async throws {
        let daemon = try DaemonProcess(extraConfig: frameLimit.map { "limits:\n  max-frame-bytes: \($0)\n" } ?? "")
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(client.maximumChunkSize == expectedChunk)
        let content = (0..<(3 * expectedChunk + 12_345)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try await client.file("f").write(content, protection: .none)
        var pieces: [Int] = []
        var readBack: [UInt8] = []
        for try await piece in client.file("f").readChunks() {
            pieces.append(piece.count)
            readBack += piece
        }
        #expect(pieces == [expectedChunk, expectedChunk, expectedChunk, 12_345])
        #expect(readBack == content)
        #expect(try await client.file("f").read() == content)
        // The daemon's stream of the whole file keeps to the same chunk, as
        // a raw reader sees each frame: `read` "f" from 0 to the end.
        let raw = try RawConnection(path: daemon.socketPath)
        defer { raw.close() }
        try raw.handshake()
        try raw.send(type: 0x0A, id: 2, body: [0, 1] + Array("f".utf8) + [UInt8](repeating: 0, count: 8)
                         + [UInt8](repeating: 0xFF, count: 8))
        var streamed: [Int] = []
        while let frame = try raw.readFrame(), frame.type == 0x88 { streamed.append(frame.body.count - 4) }
        #expect(streamed == [expectedChunk, expectedChunk, expectedChunk, 12_345])
        let handle = try await client.file("f").open()
        #expect(try await handle.read(offset: 1, count: content.count) == Array(content.dropFirst()))
        await handle.close()
        // A file ending on a 64 KiB boundary, read past its end: the short
        // answer could be a smaller daemon chunk, so the handle asks once
        // more and stops at the empty answer.
        let whole = Array(content.prefix(3 * 64 * 1024))
        try await client.file("g").write(whole, protection: .none)
        let second = try await client.file("g").open()
        #expect(try await second.read(offset: 0, count: 4 * expectedChunk) == whole)
        await second.close()
    }

    @Test("whole and ranged reads are exact at the edges: empty, one byte, one chunk, a chunk and a byte; ranges at, past and beyond the end")
    func readsAtTheEdges() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let chunk = client.maximumChunkSize
        for size in [0, 1, 4096, chunk, chunk + 1] {
            let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
            let file = client.file("edge-\(size)")
            try await file.write(content, protection: .completeUntilFirstUserAuthentication, durable: false)
            #expect(try await file.read() == content, "size \(size)")
            let end = UInt64(size)
            #expect(try await file.read(range: 0..<end) == content, "size \(size)")
            #expect(try await file.read(range: 0..<(end + 10)) == content, "size \(size)")
            #expect(try await file.read(range: end..<(end + 10)) == [], "size \(size)")
            #expect(try await file.read(range: (end + 5)..<(end + 10)) == [], "size \(size)")
            if size > 1 {
                #expect(try await file.read(range: 1..<(end - 1)) == Array(content[1..<(size - 1)]), "size \(size)")
            }
            let handle = try await file.open()
            #expect(try await handle.read(offset: end, count: 10) == [], "size \(size)")
            await handle.close()
        }
        // On the wire: a file within one chunk is one chunk, then the end;
        // an empty one only the end.
        let raw = try RawConnection(path: daemon.socketPath)
        defer { raw.close() }
        try raw.handshake()
        for (name, expected) in [("edge-4096", [4096]), ("edge-0", [])] {
            try raw.send(type: 0x0A, id: 2, body: [0, UInt8(name.utf8.count)] + Array(name.utf8)
                             + [UInt8](repeating: 0, count: 8) + [UInt8](repeating: 0xFF, count: 8))
            var chunks: [Int] = []
            var last: UInt8?
            while let frame = try raw.readFrame() {
                last = frame.type
                guard frame.type == 0x88 else { break }
                chunks.append(frame.body.count - 4)
            }
            #expect(chunks == expected, "\(name)")
            #expect(last == 0x89, "\(name): the answer ends with end")
        }
    }

    @Test("a handle's writes and appends longer than a chunk go out in chunks and land whole, at their offsets")
    func handleWritesAcrossChunks() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let chunk = client.maximumChunkSize
        let written = (0..<(2 * chunk + 70_001)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        let appended = (0..<(chunk + 3)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        let handle = try await client.file("h").open(.create(.completeUntilFirstUserAuthentication))
        #expect(try await handle.write(written, at: 1_000) == UInt64(1_000 + written.count))
        #expect(try await handle.append(appended) == UInt64(1_000 + written.count + appended.count))
        let expected = [UInt8](repeating: 0, count: 1_000) + written + appended
        #expect(try await handle.read(offset: 0, count: expected.count + 10) == expected)
        await handle.close()
        #expect(try await client.file("h").read() == expected)
        await client.close()
    }

    @Test("a streamed write sends the bytes each element held when given, though the source rewrites one array in place")
    func sourceRewritingItsArray() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let chunk = client.maximumChunkSize
        // A chunk and a half per element: some chunks are sent from the
        // element itself, the rest from the write's own buffer.
        let source = RewrittenArrayChunks(size: chunk + chunk / 2 + 7, count: 12)
        #expect(try await client.file("rewritten").write(contentsOf: source, protection: .none)
            == UInt64(source.size * source.count))
        let expected = (0..<source.count).flatMap { RewrittenArrayChunks.content(element: $0, size: source.size) }
        let readBack = try await client.file("rewritten").read()
        #expect(readBack.count == expected.count)
        let same = readBack == expected
        #expect(same, "the file differs from what the source gave")
        await client.close()
    }

    @Test("the daemon allocates from one malloc arena, however many of its threads serve streams at once",
          .enabled(if: getuid() == 0, "the daemon is not dumpable, so only root may read its /proc/PID/maps"))
    func oneMallocArena() async throws {
        let daemon = try DaemonProcess()
        let clients = [try await DataProtectionClient.connect(socketPath: daemon.socketPath),
                       try await DataProtectionClient.connect(socketPath: daemon.socketPath)]
        try await withThrowingTaskGroup { group in
            for (number, client) in clients.enumerated() {
                group.addTask {
                    let file = client.file("stream-\(number)")
                    try await file.write(contentsOf: BoundedChunks(count: 16), protection: .none)
                    for try await _ in file.readChunks() {}
                }
            }
            try await group.waitForAll()
        }
        // Without the limit, each thread that allocated has an arena heap of its own.
        let maps = try String(contentsOfFile: "/proc/\(daemon.pid)/maps", encoding: .utf8)
        #expect(GlibcArenaHeaps.count(inMaps: maps) == 0)
    }
}

/// Produces `count` chunks lazily, one per `next()`, so nothing piles up.
struct BoundedChunks: AsyncSequence {
    typealias Element = [UInt8]
    let count: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var index = 0
        let count: Int
        mutating func next() async -> [UInt8]? {
            guard index < count else { return nil }
            defer { index += 1 }
            return StreamingEndToEndTests.chunk(index)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(count: count) }
}

/// Elements from one array the iterator rewrites in place for each element,
/// as a reader filling its buffer again would: what was sent must be what
/// the element held when it was given.
struct RewrittenArrayChunks: AsyncSequence {
    typealias Element = [UInt8]
    let size: Int
    let count: Int

    static func content(element: Int, size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ element &* 29 &+ $0 >> 11) }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var index = 0
        let size: Int
        let count: Int
        var buffer: [UInt8]

        mutating func next() async -> [UInt8]? {
            guard index < count else { return nil }
            defer { index += 1 }
            let content = RewrittenArrayChunks.content(element: index, size: size)
            buffer.withUnsafeMutableBufferPointer { target in
                for position in target.indices { target[position] = content[position] }
            }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(size: size, count: count, buffer: [UInt8](repeating: 0, count: size))
    }
}
