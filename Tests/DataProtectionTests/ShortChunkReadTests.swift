import DataProtection
import Dispatch
import Foundation
import Glibc
import ProtectionTestSupport
import Synchronization
import Testing

/// The client library against a daemon whose chunk is smaller than the
/// client's (PROTOCOL.md, section 8.1): a `data` answer that is shorter
/// than asked but a whole multiple of 64 KiB is not the end of the file,
/// and the client must ask again from right after it (`Handle.read` and
/// `readChunks`).
/// protd always cuts at the chunk it announced, so the peer here is a
/// script that announces the default frame limit and then answers every
/// `handleRead` with at most 256 KiB.
@Suite("Reads from a daemon that cuts chunks short")
struct ShortChunkReadTests {
    /// 1.5 MiB and 1,000 bytes: several cut answers, then a short last one.
    static let size = 3 * 512 * 1024 + 1000
    static let cut = 256 * 1024

    static func content(_ range: Range<Int>) -> [UInt8] {
        range.map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
    }

    /// Compares as a Bool: a failed `==` on megabyte arrays would make the
    /// test library compute their difference, which takes minutes.
    static func expect(_ bytes: [UInt8], equals range: Range<Int>, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(bytes.count == range.count, sourceLocation: sourceLocation)
        let same = bytes == content(range)
        #expect(same, "content differs from bytes \(range)", sourceLocation: sourceLocation)
    }

    @Test("Handle.read and readChunks, whole and ranged, return every byte when each answer is cut to 256 KiB")
    func cutAnswersAreNotTheEnd() async throws {
        let directory = try TemporaryDirectory("cutting-peer")
        defer { directory.remove() }
        let peer = try CuttingPeer(path: directory.appending("s"), size: Self.size, cut: Self.cut,
                                   content: Self.content)
        let client = try await DataProtectionClient.connect(socketPath: peer.path)
        let handle = try await client.file("cut").open(.existing)
        try await Self.expect(handle.read(offset: 0, count: Self.size + 5000), equals: 0..<Self.size)
        try await Self.expect(handle.read(offset: 100_000, count: 700_000), equals: 100_000..<800_000)
        var streamed: [UInt8] = []
        for try await piece in client.file("cut").readChunks() { streamed += piece }
        Self.expect(streamed, equals: 0..<Self.size)
        var ranged: [UInt8] = []
        for try await piece in client.file("cut").readChunks(range: 300_000..<1_400_000) { ranged += piece }
        Self.expect(ranged, equals: 300_000..<1_400_000)
        await handle.close()
        await client.close()
        #expect(try #require(await peer.finish()) > 0)
    }
}

/// A stand-in for protd that speaks just enough of the protocol (hello,
/// open, handleRead, handleClose) and cuts every read. It serves each
/// connection on a thread of its own.
private final class CuttingPeer: @unchecked Sendable {
    let path: String
    private let listener: Int32
    private let served = DispatchGroup()
    /// `handleRead`s answered with fewer bytes than asked although the file had more.
    private let cutAnswers = Mutex(0)

    init(path: String, size: Int, cut: Int, content: @escaping @Sendable (Range<Int>) -> [UInt8]) throws {
        self.path = path
        guard let listener = unixSocket(type: Int32(SOCK_STREAM.rawValue), path: path, bind) else {
            throw POSIXError(.EADDRINUSE)
        }
        Glibc.listen(listener, 8)
        self.listener = listener
        DispatchQueue.global().async { [self] in
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                served.enter()
                DispatchQueue.global().async { [self] in
                    defer { served.leave() }
                    serve(fd, size: size, cut: cut, content: content)
                }
            }
        }
    }

    private func serve(_ fd: Int32, size: Int, cut: Int, content: (Range<Int>) -> [UInt8]) {
        // Long enough for a client that connects slowly while the rest of
        // the suite keeps both cores busy (seconds, at times), but bounded.
        let connection = RawConnection(fd: fd, receiveTimeoutSeconds: 60)
        defer { connection.close() }
        while let frame = try? connection.readFrame() {
            switch frame.type {
            case 0x01: // hello: version 3, the default frame limit (512 KiB chunks)
                try? connection.send(type: 0x81, id: frame.id,
                                     body: Self.bigEndian(UInt16(3)) + Self.bigEndian(UInt32(1_049_600))
                                         + Self.bigEndian(getuid()) + Self.bigEndian(getgid()))
            case 0x0B: // open: handle 1, class none, the size
                try? connection.send(type: 0x84, id: frame.id,
                                     body: Self.bigEndian(UInt32(1)) + [4] + Self.bigEndian(UInt64(size)))
            case 0x0C: // handleRead: handle, offset u64, length u32
                let offset = Int(frame.body[4..<12].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
                let length = Int(frame.body[12..<16].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                let count = max(0, min(length, cut, size - offset))
                if count < min(length, size - offset) { cutAnswers.withLock { $0 += 1 } }
                try? connection.send(type: 0x87, id: frame.id,
                                     body: Self.bigEndian(UInt32(count)) + content(offset..<(offset + count)))
            case 0x11: // handleClose
                try? connection.send(type: 0x80, id: frame.id, body: [])
            default:
                return
            }
        }
    }

    /// Waits (off the cooperative pool, at most 90 s) for the client to
    /// hang up every connection; returns how many answers were cut, or nil
    /// on a timeout.
    func finish() async -> Int? {
        let ended = await withCheckedContinuation { finished in
            DispatchQueue.global().async { [served] in
                finished.resume(returning: served.wait(timeout: .now() + 90) == .success)
            }
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        return ended ? cutAnswers.withLock { $0 } : nil
    }

    private static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian, Array.init)
    }
}
