import Foundation
import ProtectionConfiguration
import ProtectionTestSupport
import Testing

/// A temporary directory holding configuration files for one test.
final class ConfigFiles {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory("config") }

    /// Writes `text` to `name` and returns its path.
    func write(_ name: String, _ text: String) throws -> String {
        let path = directory.appending(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The path `name` would have in the directory (the file need not exist).
    func path(_ name: String) -> String { directory.appending(name) }

    deinit { directory.remove() }
}

/// The repository root, found from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The text of a file in the repository (`Config/protd.yaml`).
func repositoryFile(_ relativePath: String) throws -> String {
    try String(contentsOfFile: repositoryRoot + "/" + relativePath, encoding: .utf8)
}

/// Loads with `arguments` (no program name) and `environment`.
func load(_ arguments: [String] = [], environment: [String: String] = [:]) async throws -> DaemonConfiguration {
    try await DaemonConfiguration.load(arguments: arguments, environment: environment)
}

/// Loads expecting a `ConfigurationError`, and returns it.
func loadError(_ arguments: [String] = [], environment: [String: String] = [:],
               sourceLocation: SourceLocation = #_sourceLocation) async -> ConfigurationError? {
    await #expect(throws: ConfigurationError.self, sourceLocation: sourceLocation) {
        try await DaemonConfiguration.load(arguments: arguments, environment: environment)
    }
}
