import ArgumentParser
import DataProtection

/// `protctl recovery remove --yes`.
struct RecoveryRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Delete the recovery key: a forgotten passcode can no longer be reset with it.",
        discussion: "Needs root or the admin group.")

    @ParentCommand var root: Protctl

    @Flag(help: "Confirm that the recovery key is to be deleted.")
    var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("without the recovery key a forgotten passcode is final; confirm with --yes") }
    }

    func run() async throws {
        try await CommandContext(root).run { client in
            let wasSet = try await client.servingStatus().recoveryKeySet
            try await client.removeRecoveryKey()
            if root.json { Output.json(["recoveryKeySet": false]) } else {
                Output.line(wasSet ? "recovery key removed" : "no recovery key was set")
            }
        }
    }
}
