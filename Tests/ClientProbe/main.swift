import DataProtection
import Foundation
import Glibc

// protd-client-probe: runs one client-library scenario in a process of its
// own beside a 1 ms ticker task, and prints what it measured as
// `key=value` lines. The end-to-end tests start it, so that no other test
// running in their process can hold up the ticker.
//
//   protd-client-probe bulk SOCKET        4 large writes and 4 readChunks at once
//   protd-client-probe stopped SOCKET PID a large write and a readChunks, cancelled
//                                         while the daemon (PID) is stopped
//   protd-client-probe hold SOCKET COUNT  COUNT connections, each listing its files;
//                                         holds those served until stdin ends

/// A task that sleeps 1 ms in a loop and records its longest gap.
final class Ticker: Sendable {
    private let task: Task<Duration, Never>

    init() {
        task = Task {
            let clock = ContinuousClock()
            var last = clock.now
            var longest = Duration.zero
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(1))
                let now = clock.now
                longest = max(longest, now - last)
                last = now
            }
            return longest
        }
    }

    /// Stops the ticker; the longest gap in milliseconds.
    func stop() async -> Int {
        task.cancel()
        let gap = await task.value
        return Int(gap.components.seconds * 1000 + gap.components.attoseconds / 1_000_000_000_000_000)
    }
}

let large = 64 << 20

/// Content whose every byte depends on its position.
func content(_ count: Int, seed: UInt8) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: index >> 9) &+ seed }
        initialized = count
    }
}

/// Whether `chunk` equals `whole` from `offset` (memcmp: a debug build's
/// array comparison would itself hold a thread for long).
func matches(_ chunk: [UInt8], _ whole: [UInt8], at offset: Int) -> Bool {
    guard offset + chunk.count <= whole.count else { return false }
    return chunk.withUnsafeBytes { piece in
        whole.withUnsafeBytes { memcmp(piece.baseAddress!, $0.baseAddress! + offset, piece.count) == 0 }
    }
}

func bulk(socket: String) async throws {
    let client = try await DataProtectionClient.connect(socketPath: socket)
    let contents = (0..<4).map { content(large, seed: UInt8($0)) }
    for (index, bytes) in contents.enumerated() { try await client.file("read-\(index)").write(bytes, durable: false) }
    let ticker = Ticker()
    let correct = try await withThrowingTaskGroup(of: Bool.self) { group in
        for (index, bytes) in contents.enumerated() {
            group.addTask { try await client.file("write-\(index)").write(bytes, durable: false) == UInt64(large) }
            group.addTask {
                var offset = 0
                var same = true
                for try await chunk in client.file("read-\(index)").readChunks() {
                    same = same && matches(chunk, bytes, at: offset)
                    offset += chunk.count
                }
                return same && offset == bytes.count
            }
        }
        return try await group.reduce(true) { $0 && $1 }
    }
    print("gap-ms=\(await ticker.stop())")
    print("correct=\(correct)")
    await client.close()
}

/// Whether /proc shows `pid` stopped (state `T`, after the command name's closing parenthesis).
func isStopped(_ pid: pid_t) -> Bool {
    guard let line = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = line.lastIndex(of: ")") else { return false }
    return line[line.index(after: close)...].split(separator: " ").first == "T"
}

func stopped(socket: String, daemon: pid_t) async throws {
    let client = try await DataProtectionClient.connect(socketPath: socket)
    try await client.file("source").write(content(large, seed: 9), durable: false)
    var chunks = client.file("source").readChunks().makeAsyncIterator()
    _ = try await chunks.next()

    kill(daemon, SIGSTOP)
    // The signal is only queued when kill returns: wait until the kernel shows the daemon stopped.
    var waited = 0
    while !isStopped(daemon), waited < 5000 {
        usleep(1000)
        waited += 1
    }
    let ticker = Ticker()
    let data = content(4 * large, seed: 3)
    let writer = Task { try await client.file("stalled").write(data, durable: false) }
    let reader = Task { [chunks] in
        var chunks = chunks
        while try await chunks.next() != nil {}
    }
    // Long enough for the write to fill the socket and wait for room.
    try await Task.sleep(for: .milliseconds(500))
    let cancelled = ContinuousClock.now
    writer.cancel()
    reader.cancel()
    let writeOutcome: String
    do { _ = try await writer.value; writeOutcome = "finished" } catch { writeOutcome = "\((error as? DataProtectionError)?.code.description ?? "\(error)")" }
    let readOutcome: String
    do { try await reader.value; readOutcome = "finished" } catch { readOutcome = "\((error as? DataProtectionError)?.code.description ?? "\(error)")" }
    let took = ContinuousClock.now - cancelled
    print("cancel-ms=\(Int(took.components.seconds * 1000 + took.components.attoseconds / 1_000_000_000_000_000))")
    print("write=\(writeOutcome)")
    print("read=\(readOutcome)")
    print("gap-ms=\(await ticker.stop())")
    kill(daemon, SIGCONT)
    print("after=\(try await client.status().state)")
    print("stalled-exists=\(try await client.file("stalled").exists)")
    await client.close()
}

/// Opens `count` connections one after another, each listing its files,
/// prints how many were served (`held=`), then keeps them until stdin ends.
func hold(socket: String, count: Int) async {
    var held: [DataProtectionClient] = []
    var refused = 0
    for _ in 0..<count {
        do {
            let client = try await DataProtectionClient.connect(socketPath: socket)
            do {
                _ = try await client.list()
                held.append(client)
            } catch {
                refused += 1
                await client.close()
            }
        } catch {
            refused += 1
        }
    }
    FileHandle.standardOutput.write(Data("held=\(held.count) refused=\(refused)\n".utf8))
    _ = FileHandle.standardInput.readDataToEndOfFile()
    for client in held { await client.close() }
}

let arguments = CommandLine.arguments
do {
    switch arguments.count > 2 ? arguments[1] : "" {
    case "bulk": try await bulk(socket: arguments[2])
    case "stopped" where arguments.count > 3: try await stopped(socket: arguments[2], daemon: pid_t(arguments[3])!)
    case "hold" where arguments.count > 3: await hold(socket: arguments[2], count: Int(arguments[3])!)
    default:
        FileHandle.standardError.write(Data("usage: protd-client-probe bulk SOCKET | stopped SOCKET PID | hold SOCKET COUNT\n".utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("protd-client-probe: \(error)\n".utf8))
    exit(1)
}
