import ArgumentParser
import DataProtection

/// `protctl passwd [--stdin]`.
struct Passwd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set the first passcode, or change it.",
        discussion: """
            Needs root or the admin group. On a terminal the current passcode is asked first (when \
            one is set) and the new one twice. With --stdin the lines are the current passcode (only \
            when one is set), then the new one.
            """)

    @ParentCommand var root: Protctl

    @Flag(help: "Read the passcodes from standard input, one per line.")
    var stdin = false

    func run() async throws {
        try await CommandContext(root).run { client in
            let passcodeSet = try await client.servingStatus().passcodeSet
            let old: String?
            let new: String
            if stdin {
                let lines = try PasscodeInput.stdinLines(passcodeSet ? 2 : 1)
                (old, new) = passcodeSet ? (lines[0], lines[1]) : (nil, lines[0])
            } else {
                old = passcodeSet ? try PasscodeInput.prompt("Current passcode: ") : nil
                new = try PasscodeInput.promptNew()
            }
            try await client.setPasscode(new, old: old)
            if root.json { Output.json(["passcodeSet": true]) } else { Output.line("passcode \(passcodeSet ? "changed" : "set")") }
        }
    }
}
