import Foundation
import Glibc
import ProtectionTestSupport

/// The lock fan-out's subscribers, spread over processes of their own
/// (`protd-bench-subscribers`, built next to protd-bench), as applications
/// are, so protd-bench's own process does not carry them. All of them read
/// one input pipe, whose end tells them to exit, and write their lines to
/// one output pipe. Receipt times are offsets from `origin` on
/// `ContinuousClock`, CLOCK_MONOTONIC on Linux, the same clock in every
/// process.
final class SubscriberFleet {
    /// Subscribers per process, at most.
    static let subscribersPerProcess = 250
    /// The helper executable.
    static let helperName = "protd-bench-subscribers"

    /// The instant every receipt time is measured from.
    let origin: ContinuousClock.Instant
    /// How many processes the subscribers are spread over.
    var processCount: Int { processes.count }
    private let subscribers: Int
    private let processes: [Process]
    private let input: FileHandle
    private var news: AsyncStream<News>.Iterator
    /// Feeds `news`; kept for the watchdog of each wait.
    private let newsFeed: AsyncStream<News>.Continuation
    /// Numbers the waits, so a watchdog that fires too late is told apart.
    private var waits: UInt64 = 0

    /// The longest a wait for the children's next line may take (launching
    /// 1,000 subscribers takes a few seconds).
    static let patience: Duration = .seconds(120)

    /// What the children's output says next.
    private enum News: Sendable {
        /// A line they wrote.
        case line(String)
        /// One of them failed, or all of them exited.
        case ended
        /// The watchdog of the wait with this number fired.
        case silence(UInt64)
    }

    /// Starts the processes for `subscribers` and returns once every
    /// subscriber is subscribed and listening. `arguments` go to every
    /// process (`--plain` for the fan-out floor).
    static func launch(subscribers: Int, socketPath: String, arguments: [String] = []) async throws -> SubscriberFleet {
        let helper = CommandRunner.builtProduct(helperName)
        guard FileManager.default.isExecutableFile(atPath: helper) else {
            throw BenchFailure("\(helper) is missing; build it with `swift build -c release --product protd-bench`")
        }
        let origin = ContinuousClock.now
        let originJSON = String(decoding: try JSONEncoder().encode(origin), as: UTF8.self)
        let count = (subscribers + subscribersPerProcess - 1) / subscribersPerProcess
        let input = Pipe()
        let output = Pipe()
        let (stream, continuation) = AsyncStream.makeStream(of: News.self)
        forwardLines(of: output, to: continuation)
        var processes: [Process] = []
        for index in 0..<count {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: helper)
            let share = subscribers / count + (index < subscribers % count ? 1 : 0)
            process.arguments = ["--socket", socketPath, "--count", "\(share)", "--origin", originJSON] + arguments
            // File handles, not pipes: Process closes a pipe's far end after the first child.
            process.standardInput = input.fileHandleForReading
            process.standardOutput = output.fileHandleForWriting
            // A child that fails leaves the others' output open: say so at once instead of waiting forever.
            process.terminationHandler = { child in
                if child.terminationReason != .exit || child.terminationStatus != 0 { continuation.yield(.ended) }
            }
            try process.run()
            processes.append(process)
        }
        // Only the children keep these ends open, so the output ends when they all exited.
        try input.fileHandleForReading.close()
        try output.fileHandleForWriting.close()
        let fleet = SubscriberFleet(origin: origin, subscribers: subscribers, processes: processes,
                                    input: input.fileHandleForWriting,
                                    news: stream.makeAsyncIterator(), newsFeed: continuation)
        for _ in 0..<count {
            let words = try await fleet.nextLine()
            guard words == ["ready"] else { throw BenchFailure("a subscriber process said \(words), not ready") }
        }
        return fleet
    }

    private init(origin: ContinuousClock.Instant, subscribers: Int, processes: [Process], input: FileHandle,
                 news: AsyncStream<News>.Iterator, newsFeed: AsyncStream<News>.Continuation) {
        self.origin = origin
        self.subscribers = subscribers
        self.processes = processes
        self.input = input
        self.news = news
        self.newsFeed = newsFeed
    }

    /// When every subscriber received the next will-become-unavailable
    /// event, as offsets from `origin`.
    func nextDelivery() async throws -> [Duration] {
        try await nextReceipts("delivered")
    }

    /// Returns once every subscriber received the next did-become-available
    /// event (an unlock's), so that the next lock is timed from a quiet
    /// fleet and daemon rather than over the tail of that fan-out.
    func awaitAvailable() async throws {
        _ = try await nextReceipts("available")
    }

    /// Every subscriber's receipt time of the next event reported in lines
    /// starting with `word` (see the helper's `DeliveryLog`).
    private func nextReceipts(_ word: Substring) async throws -> [Duration] {
        var sequence: Substring?
        var receipts: [Duration] = []
        while receipts.count < subscribers {
            let words = try await nextLine()
            guard words.count >= 2, words[0] == word, sequence == nil || sequence == words[1] else {
                throw BenchFailure("expected \(word) receipts of event \(sequence ?? "?"), got \(words.prefix(3))")
            }
            sequence = words[1]
            receipts += words.dropFirst(2).compactMap { Int64($0) }.map { Duration.nanoseconds($0) }
        }
        return receipts
    }

    /// Ends every subscriber process: they exit when their input ends.
    func stop() {
        try? input.close()
        for process in processes { process.waitUntilExit() }
    }

    /// The children's next line, split into words; throws when one of them
    /// failed or none of them said anything for `patience`.
    private func nextLine() async throws -> [Substring] {
        waits += 1
        let wait = waits
        let feed = newsFeed
        let patience = Self.patience
        let watchdog = Task {
            try await Task.sleep(for: patience)
            feed.yield(.silence(wait))
        }
        defer { watchdog.cancel() }
        while true {
            switch await news.next() {
            case .line(let text)?:
                return text.split(separator: " ")
            case .silence(let fired)? where fired != wait:
                continue  // an earlier wait's watchdog, come too late
            case .silence?:
                stop()
                throw BenchFailure("the subscriber processes said nothing for \(Self.patience)")
            case .ended?, nil:
                stop()
                let statuses = processes.map { "\($0.terminationStatus)" }.joined(separator: ", ")
                throw BenchFailure("a subscriber process failed (exit statuses \(statuses)); see its output above")
            }
        }
    }

    /// Feeds each complete line `pipe` delivers into `continuation`, then
    /// `.ended` when the output ends (every child exited). A thread blocked in
    /// read(2), not `readabilityHandler`: tearing down that handler's
    /// dispatch read source can crash libdispatch's epoll bookkeeping on
    /// Linux (swift-corelibs-libdispatch issue 949), and did, in CI.
    private static func forwardLines(of pipe: Pipe, to continuation: AsyncStream<News>.Continuation) {
        let handle = pipe.fileHandleForReading
        let reader = Thread {
            // The closure holds `handle`, so its descriptor stays open until the loop ends.
            let splitter = LineSplitter()
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                for line in splitter.lines(appending: Data(buffer[..<count])) { continuation.yield(.line(line)) }
            }
            continuation.yield(.ended)
            continuation.finish()
        }
        reader.start()
    }
}
