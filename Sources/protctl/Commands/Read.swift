import ArgumentParser
import DataProtection
import Foundation

/// `protctl read NAME [--output FILE] [--offset N --length N]`.
struct Read: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Read a file (or a byte range) to stdout or --output.")

    @ParentCommand var root: Protctl

    @Argument(help: "The file's name.")
    var name: String

    @Option(help: ArgumentHelp("Write the content to this file instead of stdout.", valueName: "file"))
    var output: String?

    @Option(help: "First byte to read (with --length).")
    var offset: UInt64?

    @Option(help: "Number of bytes to read (with --offset); fewer where the file ends.")
    var length: UInt64?

    func validate() throws {
        if (offset == nil) != (length == nil) { throw ValidationError("--offset and --length go together") }
        if root.json && output != nil {
            throw ValidationError("--json prints the content (base64) on standard output; leave out --output or --json")
        }
    }

    func run() async throws {
        try await CommandContext(root).run { client in
            let file = client.file(name)
            // A range past the end of the file reads to the end, so an end
            // past UInt64.max is the same as UInt64.max.
            let chunks = offset.map { offset in
                let (end, overflow) = offset.addingReportingOverflow(length ?? 0)
                return file.readChunks(range: offset..<(overflow ? .max : end))
            } ?? file.readChunks()
            if root.json {
                var content: [UInt8] = []
                for try await chunk in chunks { content += chunk }
                Output.json(["name": name, "size": content.count, "base64": Data(content).base64EncodedString()])
                return
            }
            let destination = try output.map(OutputFile.init(path:)) ?? .standardOutput()
            for try await chunk in chunks { try destination.write(chunk) }
            try destination.commit()
        }
    }
}
