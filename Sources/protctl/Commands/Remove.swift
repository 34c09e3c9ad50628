import ArgumentParser
import DataProtection

/// `protctl rm NAME`.
struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete a file.")

    @ParentCommand var root: Protctl

    @Argument(help: "The file's name.")
    var name: String

    func run() async throws {
        try await CommandContext(root).run { client in
            try await client.file(name).delete()
            if root.json { Output.json(["name": name, "deleted": true]) } else { Output.line("deleted \(name)") }
        }
    }
}
