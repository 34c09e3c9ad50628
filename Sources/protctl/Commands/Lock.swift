import ArgumentParser
import DataProtection

/// `protctl lock [--grace SECONDS] [--reason requested|suspend] [--no-wait]`.
struct Lock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock: wipe the complete (class A) key and the completeUnlessOpen (class B) private key after the grace period.",
        discussion: "Needs root or the admin group. Returns once the state is locked, unless --no-wait.")

    @ParentCommand var root: Protctl

    @Option(help: ArgumentHelp("Seconds subscribers get to close complete (class A) files (default: the daemon's; 0 = now).",
                               valueName: "seconds"))
    var grace: Double?

    @Option(help: "Why, as the lock's events say: requested, or suspend (the system is going to sleep).")
    var reason: LockReasonArgument = .init(.requested)

    @Flag(help: "Return as soon as the lock has started.")
    var noWait = false

    func validate() throws {
        // NaN compares false both ways, so test finiteness first.
        if let grace, !grace.isFinite || grace < 0 || grace > 86_400 {
            throw ValidationError("--grace must be between 0 and 86400 seconds")
        }
    }

    func run() async throws {
        try await CommandContext(root).run { client in
            try await client.lock(grace: grace.map { .milliseconds(Int64($0 * 1000)) }, waitUntilLocked: !noWait,
                                  reason: reason.value)
            let state = try await client.status().state
            if root.json { Output.json(["state": state.rawValue]) } else { Output.line("state: \(state)") }
        }
    }
}
