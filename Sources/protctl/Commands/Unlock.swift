import ArgumentParser
import DataProtection

/// `protctl unlock [--stdin]`.
struct Unlock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock with the passcode.",
        discussion: """
            Asks on the terminal without echo, or reads one line from standard input with --stdin \
            (a trailing newline is optional; pam_exec's trailing NUL is ignored).
            """)

    @ParentCommand var root: Protctl

    @Flag(help: "Read the passcode from standard input.")
    var stdin = false

    func run() async throws {
        let passcode = try stdin ? PasscodeInput.stdinLines(1)[0] : PasscodeInput.prompt("Passcode: ")
        try await CommandContext(root).run { client in
            try await client.unlock(passcode: passcode)
            let state = try await client.status().state
            if root.json { Output.json(["state": state.rawValue]) } else { Output.line("state: \(state)") }
        }
    }
}
