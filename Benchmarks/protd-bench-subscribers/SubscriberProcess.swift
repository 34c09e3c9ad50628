import ArgumentParser
import DataProtection
import Foundation

/// protd-bench-subscribers: some of the lock fan-out's subscribers, in a
/// process of their own, as applications are. protd-bench starts several,
/// all on one pipe for input and one for output.
///
/// It connects its clients, subscribes each, prints `ready`, and for every
/// `willBecomeUnavailable` notes when each client received it, acknowledges
/// at once, and reports through `DeliveryLog`, which also hears of every
/// `didBecomeAvailable`. By default each client takes
/// its events through an observer (`observeEvents`); with `--iterator`,
/// through an `events` iterator in a task of its own. It exits when its
/// standard input ends (protd-bench closes it, or exits).
@main
struct SubscriberProcess: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protd-bench-subscribers",
        abstract: "Lock fan-out subscribers for protd-bench (started by it, not by hand).")

    @Option(help: "The daemon's socket.")
    var socket: String

    @Option(help: "Subscribers (connections) in this process.")
    var count: Int

    @Option(help: "The clock origin: a ContinuousClock.Instant as JSON; receipt times are reported from it.")
    var origin: String

    @Flag(help: "Plain Unix sockets to protd-bench itself, for its fan-out floor: no client library, no protd.")
    var plain = false

    @Flag(help: "protd's protocol spoken by hand, without the client library.")
    var wire = false

    @Flag(help: "The client library's events iterator, one task per client, instead of its observer.")
    var iterator = false

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
    }

    func run() async throws {
        let originInstant = try JSONDecoder().decode(ContinuousClock.Instant.self, from: Data(origin.utf8))
        Self.exitWhenInputEnds()
        let log = DeliveryLog(subscribers: count, origin: originInstant)
        if plain { try PlainSocketSubscribers.serve(socketPath: socket, count: count, log: log) }
        if wire { try WireSubscribers.serve(socketPath: socket, count: count, log: log) }
        let clients = try await connect()
        if iterator {
            try await iterate(clients, log: log)
        } else {
            try await observe(clients, log: log)
        }
    }

    /// Connects and subscribes `count` clients.
    private func connect() async throws -> [DataProtectionClient] {
        var clients: [DataProtectionClient] = []
        for _ in 0..<count {
            let client = try await DataProtectionClient.connect(socketPath: socket)
            _ = try await client.subscribe()
            clients.append(client)
        }
        return clients
    }

    /// Registers an observer per client that notes and acknowledges every
    /// will-become-unavailable event and notes every did-become-available
    /// one, says `ready`, and waits for the end.
    private func observe(_ clients: [DataProtectionClient], log: DeliveryLog) async throws -> Never {
        var observations: [EventObservation] = []
        for client in clients {
            observations.append(try await client.observeEvents { event in
                switch event.kind {
                case .willBecomeUnavailable:
                    log.record(sequence: event.sequence, receivedAt: .now)
                    return .acknowledge
                case .didBecomeAvailable:
                    log.record(.available, sequence: event.sequence, receivedAt: .now)
                    return .none
                case .didBecomeUnavailable:
                    return .none
                }
            })
        }
        DeliveryLog.emit("ready")
        while true {
            try await Task.sleep(for: .seconds(3600))
            withExtendedLifetime(observations) {}
        }
    }

    /// Iterates each client's events in a task of its own, says `ready`,
    /// then notes and acknowledges every will-become-unavailable event and
    /// notes every did-become-available one.
    private func iterate(_ clients: [DataProtectionClient], log: DeliveryLog) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            let (registered, registration) = AsyncStream.makeStream(of: Void.self)
            for client in clients {
                group.addTask {
                    // The iterator takes events from the moment it is made.
                    var events = client.events.makeAsyncIterator()
                    registration.yield()
                    while let event = try await events.next() {
                        let receivedAt = ContinuousClock.now
                        if case .didBecomeAvailable = event.kind {
                            log.record(.available, sequence: event.sequence, receivedAt: receivedAt)
                        }
                        guard case .willBecomeUnavailable = event.kind else { continue }
                        try await client.acknowledge(event)
                        log.record(sequence: event.sequence, receivedAt: receivedAt)
                    }
                }
            }
            var ready = 0
            for await _ in registered {
                ready += 1
                if ready == count { break }
            }
            DeliveryLog.emit("ready")
        }
    }

    /// Exits once standard input ends.
    private static func exitWhenInputEnds() {
        let watcher = Thread {
            var byte: UInt8 = 0
            while read(STDIN_FILENO, &byte, 1) > 0 {}
            Foundation.exit(0)
        }
        watcher.start()
    }
}
