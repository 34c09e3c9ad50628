import ArgumentParser
import DataProtection

/// `protctl watch [--count N] [--ack]`.
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print lock events as they arrive (JSON lines with --json).",
        discussion: """
            The first line says the watcher is subscribed (with --json: {"subscribed": true, "state": ..., \
            "eventSequence": ...}); then one line per event, with its reason (requested, inactivity, suspend, \
            shutdown) when data becomes unavailable. --count counts events only. \
            If the daemon goes away first, watch says so on stderr and exits 69.
            """)

    @ParentCommand var root: Protctl

    @Option(help: "Exit after this many events.")
    var count: Int?

    @Flag(help: "Acknowledge protectedDataWillBecomeUnavailable (this watcher holds no complete, class A, files).")
    var ack = false

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    func run() async throws {
        try await CommandContext(root).run { client in
            let status = try await client.subscribe()
            if root.json {
                Output.json(["subscribed": true, "state": status.state.rawValue, "eventSequence": status.eventSequence])
            } else {
                Output.line("watching (state: \(status.state), sequence \(status.eventSequence))")
            }
            var seen = 0
            for try await event in client.events {
                print(event)
                if ack, case .willBecomeUnavailable = event.kind { try await client.acknowledge(event) }
                seen += 1
                if let count, seen >= count { return }
            }
            // The events end only when the connection does: the daemon stopped or went away.
            throw DataProtectionError.daemonUnavailable("protd closed the connection while watching")
        }
    }

    private func print(_ event: ProtectionEvent) {
        var fields: [String: Any] = ["sequence": event.sequence, "state": event.state.rawValue]
        let name: String
        switch event.kind {
        case .willBecomeUnavailable(let deadline):
            name = "protectedDataWillBecomeUnavailable"
            fields["deadlineUnixMilliseconds"] = deadline
        case .didBecomeUnavailable:
            name = "protectedDataDidBecomeUnavailable"
        case .didBecomeAvailable(let first):
            name = "protectedDataDidBecomeAvailable"
            fields["firstUnlock"] = first
        }
        fields["event"] = name
        if let reason = event.reason { fields["reason"] = reason.rawValue }
        if root.json {
            Output.json(fields)
        } else {
            Output.line("\(event.sequence) \(name) state=\(event.state)" + (event.reason.map { " reason=\($0)" } ?? ""))
        }
    }
}
