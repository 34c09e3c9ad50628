import DataProtection
import Foundation
import ProtectionTestSupport
import ProtectionWire
import Testing

/// Direct writes (docs/PROTOCOL.md, section 8.6), spoken by hand over a raw
/// connection, and through the client library.
@Suite("Direct writes")
struct DirectWriteEndToEndTests {
    static let chunk = 512 << 10
    static let writeID: UInt32 = 2

    /// A raw connection with a direct write of `name` (class none) begun
    /// and its go-ahead read.
    static func begin(_ daemon: DaemonProcess, _ name: String = "direct") throws -> RawConnection {
        let raw = try RawConnection(path: daemon.socketPath)
        try raw.handshake()
        try raw.send(type: MessageType.writeDirect.rawValue, id: writeID,
                     body: [0, UInt8(name.utf8.count)] + Array(name.utf8) + [ProtectionClass.none.rawValue, 0])
        let answer = try #require(try raw.readFrame())
        #expect(answer.type == MessageType.ok.rawValue, "the go-ahead: \(answer)")
        return raw
    }

    static func sendChunk(_ raw: RawConnection, _ bytes: [UInt8], id: UInt32 = writeID) throws {
        try raw.sendRaw(DirectWriteStream.chunkHeader(requestID: id, count: bytes.count) + bytes)
    }

    static func content(_ count: Int, seed: Int = 0) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &+ seed) &* 2_654_435_761 >> 13) }
    }

    @Test("chunks of any size up to the limit land whole, the end's total is checked, and the connection then serves requests")
    func roundTrip() async throws {
        let daemon = try DaemonProcess()
        let raw = try Self.begin(daemon)
        let content = Self.content(9 * Self.chunk + 12_345)
        var sent = 0
        for size in [1, Self.chunk, 70_000, Self.chunk - 1] + [Int](repeating: Self.chunk, count: 10) where sent < content.count {
            let piece = min(size, content.count - sent)
            try Self.sendChunk(raw, Array(content[sent..<(sent + piece)]))
            sent += piece
        }
        try raw.sendRaw(DirectWriteStream.end(requestID: Self.writeID, total: UInt64(sent)))
        let answer = try #require(try raw.readFrame())
        #expect(answer.type == MessageType.size.rawValue && answer.id == Self.writeID)
        #expect(DirectWriteStream.readBigEndian(answer.body, as: UInt64.self) == UInt64(content.count))
        try raw.send(type: MessageType.status.rawValue, id: 3, body: [])
        #expect(try raw.readFrame()?.type == MessageType.statusReport.rawValue)
        raw.close()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await client.file("direct").read() == content)
    }

    /// Ways to break a direct write after its go-ahead.
    enum Breach: String, CaseIterable, CustomTestStringConvertible {
        case otherID, otherType, chunkOverLimit, countMismatch, wrongTotal
        var testDescription: String { rawValue }
    }

    @Test("a frame that breaks a direct write gets protocolError and a close; the old content stays, no temporary file",
          arguments: Breach.allCases)
    func breaches(_ breach: Breach) async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("direct").write([1, 2, 3], protection: .none)
        let raw = try Self.begin(daemon)
        try Self.sendChunk(raw, Self.content(Self.chunk))
        // The daemon may close before it has taken all of a breaching frame.
        switch breach {
        case .otherID:
            try? Self.sendChunk(raw, [1], id: Self.writeID + 1)
        case .otherType:
            try? raw.send(type: MessageType.status.rawValue, id: Self.writeID, body: [])
        case .chunkOverLimit:
            try? Self.sendChunk(raw, Self.content(Self.chunk + 1))
        case .countMismatch:
            try? raw.sendRaw(DirectWriteStream.bigEndian(UInt32(5 + 4 + 10)) + [MessageType.writeChunk.rawValue]
                            + DirectWriteStream.bigEndian(Self.writeID) + DirectWriteStream.bigEndian(UInt32(11))
                            + [UInt8](repeating: 0, count: 10))
        case .wrongTotal:
            try? raw.sendRaw(DirectWriteStream.end(requestID: Self.writeID, total: UInt64(Self.chunk + 1)))
        }
        let answer = try #require(try raw.readFrame())
        #expect(answer.type == MessageType.error.rawValue && answer.id == 0, "\(answer)")
        #expect(raw.readsEndOfStream(orReset: true))
        raw.close()
        #expect(try await client.file("direct").read() == [1, 2, 3])
        #expect(try await EndToEnd.eventually { try daemon.writeTemporaries().isEmpty })
    }

    @Test("an abort is answered ok and keeps the old content; a client leaving mid-chunk leaves no temporary file")
    func abortAndLeaving() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("direct").write([9], protection: .none)
        let aborting = try Self.begin(daemon)
        try Self.sendChunk(aborting, Self.content(100_000))
        try aborting.sendRaw(DirectWriteStream.abort(requestID: Self.writeID))
        let answer = try #require(try aborting.readFrame())
        #expect(answer.type == MessageType.ok.rawValue && answer.id == Self.writeID)
        aborting.close()
        let leaving = try Self.begin(daemon)
        try leaving.sendRaw(DirectWriteStream.chunkHeader(requestID: Self.writeID, count: 200_000)
                            + [UInt8](repeating: 5, count: 100_000))
        try await Task.sleep(for: .milliseconds(100))
        leaving.close()
        #expect(try await EndToEnd.eventually { try daemon.writeTemporaries().isEmpty })
        #expect(try await client.file("direct").read() == [9])
    }

    @Test("beyond the direct writes the daemon runs at once it answers tooManyConnections, and the library writes on its shared connection")
    func fallBackWhenBusy() async throws {
        let daemon = try DaemonProcess()
        let stalled = try (0..<4).map { try Self.begin(daemon, "stalled\($0)") }
        let refused = try RawConnection(path: daemon.socketPath)
        try refused.handshake()
        try refused.send(type: MessageType.writeDirect.rawValue, id: Self.writeID,
                         body: [0, 1] + Array("x".utf8) + [ProtectionClass.none.rawValue, 0])
        let answer = try #require(try refused.readFrame())
        #expect(answer.type == MessageType.error.rawValue && answer.id == Self.writeID)
        #expect(DirectWriteStream.readBigEndian(answer.body.prefix(2), as: UInt16.self)
                == WireErrorCode.tooManyConnections.rawValue)
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let content = Self.content(3 * Self.chunk + 5, seed: 7)
        #expect(try await client.file("fallback").write(content, protection: .none) == UInt64(content.count))
        #expect(try await client.file("fallback").read() == content)
        for raw in stalled { raw.close() }
        refused.close()
        #expect(try await EndToEnd.eventually { try daemon.writeTemporaries().isEmpty })
    }

    @Test("with every connection taken, a large write goes on the client's own connection")
    func fallBackWhenConnectionsAreTaken() async throws {
        // One connection, and the 8 kept for administrators (tests run as
        // an administrator): the client's and 8 raw ones take them all.
        let daemon = try DaemonProcess(extraArguments: ["--limits-max-connections", "1"])
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let others = try (0..<8).map { _ in
            let raw = try RawConnection(path: daemon.socketPath)
            try raw.handshake()
            return raw
        }
        let content = Self.content(2 * Self.chunk + 1, seed: 11)
        #expect(try await client.file("crowded").write(content, protection: .none) == UInt64(content.count))
        #expect(try await client.file("crowded").read() == content)
        for raw in others { raw.close() }
    }

    @Test("a lock during a class A direct write answers protectedDataUnavailable at the next batch; the old content stays")
    func lockInvalidatesClassA() async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode(grace: 0)
        try await client.unlock(passcode: EndToEnd.passcode)
        try await client.file("secret").write([4, 4], protection: .complete)
        let raw = try RawConnection(path: daemon.socketPath)
        try raw.handshake()
        try raw.send(type: MessageType.writeDirect.rawValue, id: Self.writeID,
                     body: [0, 6] + Array("secret".utf8) + [ProtectionClass.complete.rawValue, 0])
        #expect(try raw.readFrame()?.type == MessageType.ok.rawValue)
        try Self.sendChunk(raw, Self.content(Self.chunk))
        try await client.lock(waitUntilLocked: true)
        // More than a batch (4 MiB), so the daemon seals again and finds the key gone.
        for _ in 0..<9 { try Self.sendChunk(raw, Self.content(Self.chunk)) }
        let answer = try #require(try raw.readFrame())
        #expect(answer.type == MessageType.error.rawValue && answer.id == Self.writeID)
        #expect(DirectWriteStream.readBigEndian(answer.body.prefix(2), as: UInt16.self)
                == WireErrorCode.protectedDataUnavailable.rawValue)
        try raw.sendRaw(DirectWriteStream.abort(requestID: Self.writeID))
        try raw.send(type: MessageType.status.rawValue, id: 3, body: [])
        #expect(try raw.readFrame()?.type == MessageType.statusReport.rawValue, "nothing answers the abort after the error")
        raw.close()
        try await client.unlock(passcode: EndToEnd.passcode)
        #expect(try await client.file("secret").read() == [4, 4])
    }

    @Test("the library's large writes, from an array and from a stream, go direct and read back whole")
    func library() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let content = Self.content(5 * Self.chunk + 777, seed: 3)
        #expect(try await client.file("array").write(content, protection: .none) == UInt64(content.count))
        let pieces = stride(from: 0, to: content.count, by: 300_000).map { Array(content[$0..<min($0 + 300_000, content.count)]) }
        let stream = AsyncStream<[UInt8]> { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
        #expect(try await client.file("stream").write(contentsOf: stream, protection: .none) == UInt64(content.count))
        #expect(try await client.file("array").read() == content)
        #expect(try await client.file("stream").read() == content)
    }
}
