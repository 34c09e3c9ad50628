import ArgumentParser
import DataProtection

/// `protctl erase --yes`.
struct Erase: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Crypto-shred every key and file (root or the daemon's user). Irreversible.")

    @ParentCommand var root: Protctl

    @Flag(help: "Confirm that every protected file of every user is to be destroyed.")
    var yes = false

    func validate() throws {
        guard yes else { throw ValidationError("erase destroys every protected file; confirm with --yes") }
    }

    func run() async throws {
        try await CommandContext(root).run { client in
            try await client.erase()
            if root.json { Output.json(["erased": true]) } else { Output.line("erased: every key and file is gone") }
        }
    }
}
