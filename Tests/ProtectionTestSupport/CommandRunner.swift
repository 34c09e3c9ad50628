internal import Foundation

/// Runs a program to completion with optional standard input and returns
/// what it printed, for tests of command-line tools.
public struct CommandResult: Sendable {
    /// The exit status.
    public let status: Int32
    /// Everything on stdout.
    public let stdout: String
    /// Everything on stderr.
    public let stderr: String

    /// Standard output parsed as one JSON object.
    public var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any]
    }
}

/// Starts programs for tests.
public enum CommandRunner {
    /// Path of an executable built next to the test bundle (`protd`, `protctl`).
    public static func builtProduct(_ name: String) -> String {
        URL(fileURLWithPath: DaemonProcess.binaryPath).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Runs `executable` with `arguments`, feeding `input` on stdin.
    public static func run(
        _ executable: String, _ arguments: [String], input: [UInt8]? = nil, environment: [String: String]? = nil
    ) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let stdout = Pipe()
        let stderr = Pipe()
        let stdin = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        // The throwing write: a child that exits without reading its input
        // (pamtester when no module asks for a password) is not an error.
        if let input { try? stdin.fileHandleForWriting.write(contentsOf: Data(input)) }
        try? stdin.fileHandleForWriting.close()
        // Read both pipes concurrently so neither fills up and blocks the child.
        let errorData = LockedData()
        let reader = Thread { errorData.set(stderr.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let outData = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errorData.isSet { usleep(1000) }
        return CommandResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                             stderr: String(decoding: errorData.value, as: UTF8.self))
    }
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    func set(_ value: Data) { lock.lock(); data = value; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return data != nil }
    var value: Data { lock.lock(); defer { lock.unlock() }; return data ?? Data() }
}
