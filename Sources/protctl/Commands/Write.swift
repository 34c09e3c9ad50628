import ArgumentParser
import DataProtection
import Foundation

/// `protctl write NAME [--protection CLASS] [--input FILE] [--durable]`.
struct Write: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a file's whole content (atomically) from stdin or --input.")

    @ParentCommand var root: Protctl

    @Argument(help: "The file's name, relative to your namespace (e.g. notes/today.txt).")
    var name: String

    @Option(help: "The protection class (default: untilFirstUserAuthentication).")
    var protection: ProtectionArgument?

    @Option(help: ArgumentHelp("Read the content from this file instead of stdin.", valueName: "file"))
    var input: String?

    @Flag(help: "fsync the data and the rename before returning.")
    var durable = false

    func run() async throws {
        guard let source = input.map({ FileHandle(forReadingAtPath: $0) }) ?? FileHandle.standardInput else {
            Output.error(CommandFailure(description: "cannot read \(input ?? "")", exitCode: 66))
            throw ExitCode(66)
        }
        try await CommandContext(root).run { client in
            let pieces = FileChunksReader(handle: source, pieceSize: client.maximumChunkSize)
            let size = try await client.file(name).write(contentsOf: pieces, protection: protection?.value ?? .default,
                                                         durable: durable)
            if root.json { Output.json(["name": name, "size": size]) } else { Output.line("wrote \(size) bytes to \(name)") }
        }
    }
}

/// A file read in pieces as an async sequence, so large inputs stream
/// instead of being loaded whole; pieces of the client's chunk size go out
/// as one chunk each.
struct FileChunksReader: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    let handle: FileHandle
    let pieceSize: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle
        let pieceSize: Int
        mutating func next() async throws -> [UInt8]? {
            let data = try handle.read(upToCount: pieceSize) ?? Data()
            return data.isEmpty ? nil : [UInt8](data)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: handle, pieceSize: pieceSize) }
}
