import ArgumentParser
import DataProtection

/// `protctl unlock [--stdin]`.
struct Unlock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock with the passcode.",
        discussion: """
            Asks on the terminal without echo, or reads one line from standard input with --stdin \
            (a trailing newline is optional; pam_exec's trailing NUL is ignored). With no passcode set \
            there is nothing to unlock: it says so, reads nothing and exits 0.
            """)

    @ParentCommand var root: Protctl

    @Flag(help: "Read the passcode from standard input.")
    var stdin = false

    func run() async throws {
        try await CommandContext(root).run { client in
            guard try await client.status().passcodeSet else {
                if root.json {
                    Output.json(["state": try await client.status().state.rawValue, "passcodeSet": false])
                } else {
                    Output.line("no passcode is set, so there is nothing to unlock: every class is readable")
                }
                return
            }
            let passcode = try stdin ? PasscodeInput.stdinLines(1)[0] : PasscodeInput.prompt("Passcode: ")
            try await client.unlock(passcode: passcode)
            let state = try await client.status().state
            if root.json { Output.json(["state": state.rawValue]) } else { Output.line("state: \(state)") }
        }
    }
}
