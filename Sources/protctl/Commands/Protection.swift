import ArgumentParser
import DataProtection

/// `protctl protection NAME [CLASS]`.
struct Protection: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a file's protection class, or change it (rewraps its key; content untouched).")

    @ParentCommand var root: Protctl

    @Argument(help: "The file's name.")
    var name: String

    @Argument(help: "The new class; omit to show the current one.")
    var protection: ProtectionArgument?

    func run() async throws {
        try await CommandContext(root).run { client in
            let file = client.file(name)
            if let protection { try await file.setProtection(protection.value) }
            let current = try await file.protection
            if root.json {
                Output.json(["name": name, "protection": current.description])
            } else {
                Output.line(current.description)
            }
        }
    }
}
