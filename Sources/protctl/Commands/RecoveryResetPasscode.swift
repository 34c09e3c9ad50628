import ArgumentParser
import DataProtection

/// `protctl recovery reset-passcode [--stdin]`.
struct RecoveryResetPasscode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset-passcode",
        abstract: "Set a new passcode with the recovery key, and unlock.",
        discussion: """
            For a forgotten passcode; needs no privileges. On a terminal the recovery key is asked \
            without echo, then the new passcode twice. With --stdin the lines are the recovery key, \
            then the new passcode. Case, spaces and dashes in the key do not matter. A wrong key counts \
            as a failed unlock attempt; every file stays readable, and the recovery key stays valid.
            """)

    @ParentCommand var root: Protctl

    @Flag(help: "Read the recovery key and the new passcode from standard input, one per line.")
    var stdin = false

    func run() async throws {
        try await CommandContext(root).run { client in
            guard try await client.servingStatus().recoveryKeySet else {
                throw CommandFailure(description: "no recovery key is set, so there is nothing to reset the passcode with",
                                     exitCode: ExitCodes.noInput)
            }
            let key: RecoveryKey
            let new: String
            if stdin {
                let lines = try PasscodeInput.stdinLines(2)
                (key, new) = (try Self.key(lines[0]), lines[1])
            } else {
                key = try Self.key(try PasscodeInput.prompt("Recovery key: "))
                new = try PasscodeInput.promptNew()
            }
            try await client.resetPasscode(recoveryKey: key, newPasscode: new)
            let state = try await client.status().state
            if root.json { Output.json(["state": state.rawValue, "passcodeSet": true]) } else {
                Output.line("passcode reset; state: \(state)")
            }
        }
    }

    /// The key `text` stands for; a typo is a usage error that says which group.
    private static func key(_ text: String) throws -> RecoveryKey {
        do {
            return try RecoveryKey(text: text)
        } catch {
            throw CommandFailure(description: error.message, exitCode: ExitCodes.usage)
        }
    }
}
