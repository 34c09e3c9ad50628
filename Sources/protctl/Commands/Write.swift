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

    @Flag(help: "Also fsync the rename before returning (the data is fsynced before the rename either way).")
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
        /// Kept, not just its descriptor, so that the file stays open.
        let handle: FileHandle
        let pieceSize: Int
        /// Full pieces are read into these arrays in turn, each refilled in
        /// place once the client library has sent what it held (it sends
        /// from the array itself and keeps it until the socket has the
        /// bytes, so a busy array is copied first, as arrays are): a new
        /// array per piece, as `FileHandle.read` made, cost protctl fresh
        /// pages, which were a sixth of its CPU time in a 1 GiB write.
        private var pieces: [[UInt8]] = []
        /// The array the next piece goes into.
        private var nextPiece = 0
        /// Arrays in turn: more than a write keeps in flight
        /// (`WriteSession.chunksAhead` plus what the socket has queued).
        static let piecesInTurn = 8
        /// The input ended: no more reads (a terminal would wait for more).
        private var atEnd = false

        init(handle: FileHandle, pieceSize: Int) {
            self.handle = handle
            self.pieceSize = pieceSize
        }

        mutating func next() async throws -> [UInt8]? {
            if atEnd { return nil }
            if pieces.count < Self.piecesInTurn { pieces.append([UInt8](repeating: 0, count: pieceSize)) }
            let index = nextPiece
            nextPiece = (nextPiece + 1) % Self.piecesInTurn
            let descriptor = handle.fileDescriptor
            let filled = try pieces[index].withUnsafeMutableBytes { try Self.fill($0, from: descriptor, atEnd: &atEnd) }
            if filled == 0 { return nil }
            return filled == pieceSize ? pieces[index] : Array(pieces[index][..<filled])
        }

        /// Reads until `buffer` is full or the input ends (then sets
        /// `atEnd`); the bytes read.
        private static func fill(_ buffer: UnsafeMutableRawBufferPointer, from descriptor: Int32,
                                 atEnd: inout Bool) throws -> Int {
            var filled = 0
            while filled < buffer.count {
                let count = read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
                if count == 0 {
                    atEnd = true
                    break
                }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw CommandFailure(description: "cannot read the input: \(String(cString: strerror(errno)))",
                                         exitCode: 1)
                }
                filled += count
            }
            return filled
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: handle, pieceSize: pieceSize) }
}
