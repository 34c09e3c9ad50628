import Foundation
import ProtectionTestSupport

/// The built protctl, run against a test daemon.
enum ProtctlCommand {
    /// Path of the built binary.
    static let path = CommandRunner.builtProduct("protctl")

    /// Runs protctl on `daemon`'s socket and waits for it.
    static func run(_ daemon: DaemonProcess, _ arguments: [String], input: String? = nil) throws -> CommandResult {
        try CommandRunner.run(path, ["--socket", daemon.socketPath] + arguments, input: input.map { Array($0.utf8) })
    }

    /// protctl on `daemon`'s socket with `arguments`, its output on pipes; not started yet.
    static func process(_ daemon: DaemonProcess, _ arguments: [String]) -> (Process, stdout: Pipe, stderr: Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--socket", daemon.socketPath] + arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        return (process, stdout, stderr)
    }

    /// Reads until the first newline (or end of stream); returns all bytes read.
    static func readFirstLine(_ reader: FileHandle) -> Data {
        var buffered = Data()
        while !buffered.contains(UInt8(ascii: "\n")) {
            let piece = reader.availableData
            if piece.isEmpty { break }
            buffered += piece
        }
        return buffered
    }

    /// The JSON objects among `lines` (one per line; others skipped).
    static func jsonLines(_ lines: Data) -> [[String: Any]] {
        String(decoding: lines, as: UTF8.self).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}
