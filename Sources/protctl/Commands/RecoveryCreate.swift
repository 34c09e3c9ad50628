import ArgumentParser
import DataProtection

/// `protctl recovery create [--stdin]`.
struct RecoveryCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Make a recovery key and show it once (replaces an earlier one).",
        discussion: """
            Needs root or the admin group, and the current passcode: asked on the terminal without \
            echo, or one line of standard input with --stdin. A wrong passcode counts as a failed unlock attempt.
            """)

    @ParentCommand var root: Protctl

    @Flag(help: "Read the passcode from standard input.")
    var stdin = false

    func run() async throws {
        try await CommandContext(root).run { client in
            let status = try await client.servingStatus()
            guard status.passcodeSet else {
                throw CommandFailure(description: "no passcode is set; set one with protctl passwd first",
                                     exitCode: ExitCodes.usage)
            }
            let passcode = try stdin ? PasscodeInput.stdinLines(1)[0] : PasscodeInput.prompt("Passcode: ")
            let key = try await client.createRecoveryKey(passcode: passcode)
            if root.json {
                Output.json(["recoveryKey": key.text, "replaced": status.recoveryKeySet])
                return
            }
            Output.line("recovery key: \(key.text)")
            Output.line("""
                Write it down and keep it offline, away from this machine: it is not shown again. \
                With it, anyone on this machine can set a new passcode and read every file.
                """)
            if status.recoveryKeySet { Output.line("The earlier recovery key no longer works.") }
        }
    }
}
