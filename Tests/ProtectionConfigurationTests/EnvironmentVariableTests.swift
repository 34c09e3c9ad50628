import ProtectionConfiguration
import Testing

/// The daemon and the client library read one socket variable,
/// `PROTD_SOCKET`; the daemon's old name still works but is deprecated, and
/// a `PROTD_*` variable protd does not read is named at start.
@Suite("Environment variables")
struct EnvironmentVariableTests {
    @Test("PROTD_SOCKET sets the socket path, as it does for the client library")
    func socketVariable() async throws {
        let configuration = try await load(environment: ["PROTD_SOCKET": "/tmp/env/s.sock"])
        #expect(configuration.socketPath == "/tmp/env/s.sock")
    }

    @Test("PROTD_SOCKET_PATH still sets it, and PROTD_SOCKET wins when both are set")
    func deprecatedSocketVariable() async throws {
        #expect(try await load(environment: ["PROTD_SOCKET_PATH": "/tmp/old.sock"]).socketPath == "/tmp/old.sock")
        let both = try await load(environment: ["PROTD_SOCKET_PATH": "/tmp/old.sock", "PROTD_SOCKET": "/tmp/new.sock"])
        #expect(both.socketPath == "/tmp/new.sock")
    }

    @Test("a bad PROTD_SOCKET is reported under that name")
    func badSocketVariableIsNamed() async throws {
        let error = try #require(await loadError(environment: ["PROTD_SOCKET": ""]))
        #expect(error.description.contains("PROTD_SOCKET"))
        #expect(!error.description.contains("PROTD_SOCKET_PATH"))
    }

    @Test("unknown PROTD_ variables and the deprecated name are warned about; known ones are not")
    func warnings() {
        #expect(DaemonConfiguration.environmentWarnings([
            "PROTD_SOCKET": "/s", "PROTD_CONFIG": "/c", "PROTD_LOG_LEVEL": "debug", "HOME": "/root",
        ]).isEmpty)
        let warnings = DaemonConfiguration.environmentWarnings([
            "PROTD_SOCKET_PATH": "/s", "PROTD_SOKET": "/typo", "PROTD_LOG_LEVEL": "debug",
        ])
        #expect(warnings.count == 2)
        #expect(warnings.contains { $0.contains("PROTD_SOKET") && $0.contains("no effect") })
        #expect(warnings.contains { $0.contains("PROTD_SOCKET_PATH is deprecated") && $0.contains("use PROTD_SOCKET") })
    }
}
