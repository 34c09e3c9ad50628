import ArgumentParser
import DataProtection
import Foundation

/// `protctl ls [PREFIX]`.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List your files: class, size, modification time, name.")

    @ParentCommand var root: Protctl

    @Argument(help: "Only names starting with this prefix.")
    var prefix: String = ""

    func run() async throws {
        try await CommandContext(root).run { client in
            let files = try await client.list(prefix: prefix)
            if root.json {
                Output.json(["files": files.map(Output.fields)])
                return
            }
            for file in files {
                let protection = Output.shortName(file.protection).padding(toLength: 28, withPad: " ", startingAt: 0)
                let size = String(file.size)
                Output.line("\(protection) \(String(repeating: " ", count: max(0, 12 - size.count)))\(size)  "
                            + "\(Output.timestamp(file.modificationTimeUnixSeconds))  \(Output.printable(file.name))")
            }
        }
    }
}
