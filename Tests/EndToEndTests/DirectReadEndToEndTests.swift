import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Direct reads: `readChunks` on a connection of its own, read with a
/// blocking socket (`DirectReadConnection`), against the real daemon.
@Suite("Direct reads")
struct DirectReadEndToEndTests {
    static let chunk = 512 << 10

    /// Connections the daemon has seen open and close, from its debug log.
    static func connections(_ daemon: DaemonProcess) -> (opened: Int, closed: Int) {
        let log = daemon.log
        return (log.components(separatedBy: "client connected").count - 1,
                log.components(separatedBy: "client disconnected").count - 1)
    }

    /// Waits until the daemon has `open` connections besides those closed.
    static func open(_ daemon: DaemonProcess, _ open: Int) async -> Bool {
        await EndToEnd.eventually {
            let seen = connections(daemon)
            return seen.opened - seen.closed == open
        }
    }

    @Test("readChunks reads whole and ranged on a connection of its own, closed at the end and when the iterator is dropped")
    func ownConnection() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let content = DirectWriteEndToEndTests.content(5 * Self.chunk + 777, seed: 5)
        try await client.file("big").write(content, protection: .none)
        #expect(await Self.open(daemon, 1), "only the shared connection is open")
        var chunks = client.file("big").readChunks().makeAsyncIterator()
        var whole = try #require(try await chunks.next())
        #expect(await Self.open(daemon, 2), "the read has a connection of its own")
        while let piece = try await chunks.next() { whole += piece }
        #expect(whole.count == content.count && whole == content)
        #expect(await Self.open(daemon, 1), "the read's connection closes at the end")
        var ranged: [UInt8] = []
        for try await piece in client.file("big").readChunks(range: 300_000..<2_000_000) { ranged += piece }
        #expect(ranged == Array(content[300_000..<2_000_000]))
        do {
            var dropped = client.file("big").readChunks().makeAsyncIterator()
            #expect(try await dropped.next()?.count == Self.chunk)
        }
        #expect(await Self.open(daemon, 1), "an iterator dropped early closes its connection")
        #expect(try await client.file("big").read() == content)
    }

    @Test("with every connection taken, readChunks reads on the client's shared connection")
    func fallBackWhenConnectionsAreTaken() async throws {
        // One connection, and the 8 kept for administrators (tests run as
        // an administrator): the client's and 8 raw ones take them all.
        let daemon = try DaemonProcess(extraArguments: ["--limits-max-connections", "1"])
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let content = DirectWriteEndToEndTests.content(3 * Self.chunk + 1, seed: 6)
        try await client.file("crowded").write(content, protection: .none)
        let others = try (0..<8).map { _ in
            let raw = try RawConnection(path: daemon.socketPath)
            try raw.handshake()
            return raw
        }
        var streamed: [UInt8] = []
        for try await piece in client.file("crowded").readChunks() { streamed += piece }
        #expect(streamed == content)
        for raw in others { raw.close() }
    }

    @Test("with no new connection possible (the socket's path removed), large writes and readChunks go on the shared connection")
    func fallBackWhenNoConnectionCanBeMade() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(await Self.open(daemon, 1))
        let opened = Self.connections(daemon).opened
        try FileManager.default.removeItem(atPath: daemon.socketPath)
        let content = DirectWriteEndToEndTests.content(3 * Self.chunk + 5, seed: 8)
        #expect(try await client.file("unlinked").write(content, protection: .none) == UInt64(content.count))
        var streamed: [UInt8] = []
        for try await piece in client.file("unlinked").readChunks() { streamed += piece }
        #expect(streamed == content)
        #expect(Self.connections(daemon).opened == opened, "no connection was made after the shared one")
    }

    @Test("a lock during a class A readChunks fails it with protectedDataUnavailable before its end")
    func lockStopsClassA() async throws {
        let (daemon, client) = try await EndToEnd.daemonWithPasscode(grace: 0)
        defer { withExtendedLifetime(daemon) {} }
        try await client.unlock(passcode: EndToEnd.passcode)
        let content = DirectWriteEndToEndTests.content(12 * Self.chunk, seed: 7)
        try await client.file("secret").write(content, protection: .complete)
        var received = 0
        let failure = await EndToEnd.failure {
            for try await piece in client.file("secret").readChunks() {
                if received == 0 { try await client.lock(waitUntilLocked: true) }
                received += piece.count
            }
        }
        #expect(failure == .protectedDataUnavailable)
        #expect(received < content.count, "the chunks read before the lock at most")
    }

    @Test("readChunks of a missing file or a bad name fails with the daemon's error")
    func errors() async throws {
        let daemon = try DaemonProcess()
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(await EndToEnd.failure { for try await _ in client.file("missing").readChunks() {} } == .notFound)
        #expect(await EndToEnd.failure { for try await _ in client.file("../up").readChunks() {} } == .invalidName)
        #expect(await Self.open(daemon, 1), "a failed direct read leaves no connection behind")
    }
}
