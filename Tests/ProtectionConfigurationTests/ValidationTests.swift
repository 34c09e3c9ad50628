import ProtectionConfiguration
import Testing

/// A bad value given one way, and the key the error must name.
struct BadValue: Sendable, CustomTestStringConvertible {
    let key: String
    let flag: String
    let value: String
    var testDescription: String { "\(flag) \(value)" }
}

@Suite("Refusing bad configuration")
struct ValidationTests {
    @Test("a negative grace period is refused with the exact message")
    func negativeGrace() async throws {
        let error = try #require(await loadError(["--lock-grace-period-seconds", "-1"]))
        #expect(error.code == .invalidValue)
        #expect(error.key == "lock.grace-period-seconds")
        #expect(error.description == """
            invalid value for lock.grace-period-seconds: "-1" (expected a number of seconds from 0 to 86400), \
            given by --lock-grace-period-seconds
            """)
    }

    @Test("lock.first-unlock-timeout takes seconds or a number with s, m, h or d; 0 in any form turns it off", arguments: [
        ("0", nil), ("0h", nil), ("0.0", nil), ("30", 30), ("45s", 45), ("90m", 5400), ("72h", 259_200),
        ("1.5d", 129_600), ("0.5", 0.5), ("365d", 31_536_000),
    ] as [(String, Double?)])
    func firstUnlockTimeout(text: String, seconds: Double?) async throws {
        let configuration = try await load(["--lock-first-unlock-timeout", text])
        #expect(configuration.firstUnlockTimeout == seconds.map { .milliseconds(Int64($0 * 1000)) })
    }

    @Test("a bad lock.first-unlock-timeout is refused with the exact message")
    func badFirstUnlockTimeout() async throws {
        let error = try #require(await loadError(environment: ["PROTD_LOCK_FIRST_UNLOCK_TIMEOUT": "-5m"]))
        #expect(error.code == .invalidValue)
        #expect(error.description == """
            invalid value for lock.first-unlock-timeout: "-5m" (expected a number of seconds, or a number followed \
            by s, m, h or d (90m, 72h, 1.5d), from 0 (off) to 365d), given by PROTD_LOCK_FIRST_UNLOCK_TIMEOUT
            """)
    }

    @Test("each bad value names its key and what is allowed", arguments: [
        BadValue(key: "lock.grace-period-seconds", flag: "--lock-grace-period-seconds", value: "soon"),
        BadValue(key: "lock.grace-period-seconds", flag: "--lock-grace-period-seconds", value: "nan"),
        BadValue(key: "lock.grace-period-seconds", flag: "--lock-grace-period-seconds", value: "100000"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: "soon"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: "72 h"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: "72w"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: "h"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: "366d"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: "nan"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: "1e3"),
        BadValue(key: "lock.first-unlock-timeout", flag: "--lock-first-unlock-timeout", value: ""),
        BadValue(key: "socket.mode", flag: "--socket-mode", value: "0999"),
        BadValue(key: "socket.mode", flag: "--socket-mode", value: "rw-rw----"),
        BadValue(key: "socket.mode", flag: "--socket-mode", value: "01777"),
        BadValue(key: "socket.mode", flag: "--socket-mode", value: "660"),
        BadValue(key: "log.level", flag: "--log-level", value: "verbose"),
        BadValue(key: "passcode.argon2-operations", flag: "--passcode-argon2-operations", value: "0"),
        BadValue(key: "passcode.argon2-operations", flag: "--passcode-argon2-operations", value: "-2"),
        BadValue(key: "passcode.argon2-memory-kib", flag: "--passcode-argon2-memory-kib", value: "1"),
        BadValue(key: "passcode.argon2-memory-kib", flag: "--passcode-argon2-memory-kib", value: "18014398509481984"),
        BadValue(key: "passcode.failed-attempt-delays", flag: "--passcode-failed-attempt-delays", value: "0,-5"),
        BadValue(key: "passcode.failed-attempt-delays", flag: "--passcode-failed-attempt-delays", value: "0,soon"),
        BadValue(key: "passcode.erase-after-failed-attempts", flag: "--passcode-erase-after-failed-attempts", value: "-1"),
        BadValue(key: "storage.segment-size", flag: "--storage-segment-size", value: "512"),
        BadValue(key: "storage.segment-size", flag: "--storage-segment-size", value: "64k"),
        BadValue(key: "storage.cipher", flag: "--storage-cipher", value: "aes"),
        BadValue(key: "storage.cipher", flag: "--storage-cipher", value: "AES-256-GCM"),
        BadValue(key: "limits.max-frame-bytes", flag: "--limits-max-frame-bytes", value: "1024"),
        BadValue(key: "limits.max-connections", flag: "--limits-max-connections", value: "0"),
        BadValue(key: "limits.max-open-handles-per-connection", flag: "--limits-max-open-handles-per-connection", value: "0"),
        BadValue(key: "limits.max-connections-per-uid", flag: "--limits-max-connections-per-uid", value: "0"),
        BadValue(key: "limits.max-open-handles-per-uid", flag: "--limits-max-open-handles-per-uid", value: "0"),
        BadValue(key: "limits.max-subscribers-per-uid", flag: "--limits-max-subscribers-per-uid", value: "0"),
        BadValue(key: "limits.quota-bytes-per-uid", flag: "--limits-quota-bytes-per-uid", value: "-1"),
        BadValue(key: "limits.quota-bytes-per-uid", flag: "--limits-quota-bytes-per-uid", value: "1G"),
        BadValue(key: "limits.quota-files-per-uid", flag: "--limits-quota-files-per-uid", value: "-1"),
        BadValue(key: "socket.path", flag: "--socket-path", value: ""),
        BadValue(key: "socket.path", flag: "--socket-path", value: "~/protd.sock"),
        BadValue(key: "socket.path", flag: "--socket-path", value: "/" + String(repeating: "s", count: 107)),
        BadValue(key: "state.directory", flag: "--state-directory", value: ""),
        BadValue(key: "lock.admin-group", flag: "--lock-admin-group", value: "two words"),
        BadValue(key: "socket.group", flag: "--socket-group", value: "a:b"),
    ])
    func badFlagValue(bad: BadValue) async throws {
        let error = try #require(await loadError(["\(bad.flag)=\(bad.value)"]))
        #expect(error.code == .invalidValue)
        #expect(error.key == bad.key)
        #expect(error.description.hasPrefix("invalid value for \(bad.key): \"\(bad.value)\" (expected "))
        #expect(error.description.hasSuffix("given by \(bad.flag)"))
    }

    @Test("a bad value in a variable names the key and the variable")
    func badVariable() async throws {
        let error = try #require(await loadError(environment: ["PROTD_SOCKET_MODE": "0800"]))
        #expect(error.key == "socket.mode")
        #expect(error.description.contains("\"0800\""))
        #expect(error.description.hasSuffix("given by PROTD_SOCKET_MODE"))
    }

    @Test("a bad value in the file names the key and the file")
    func badFileValue() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "log:\n  level: loud\n")
        let error = try #require(await loadError(["--config", path]))
        #expect(error.key == "log.level")
        #expect(error.description.contains("\"loud\""))
        #expect(error.description.contains("one of trace, debug, info, notice, warning, error, critical"))
        #expect(error.description.hasSuffix("given by log.level in \(path)"))
    }

    @Test("a list where one value belongs is refused with the key")
    func listForScalar() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "socket:\n  path: [a, b]\n")
        let error = try #require(await loadError(["--config", path]))
        #expect(error.key == "socket.path")
        #expect(error.description.contains("expected a single value"))
    }

    @Test("an empty list of delays is refused with the key")
    func emptyDelays() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "passcode:\n  failed-attempt-delays: []\n")
        let error = try #require(await loadError(["--config", path]))
        #expect(error.key == "passcode.failed-attempt-delays")
        #expect(error.description.contains("non-empty list"))
    }

    @Test("a missing config file is refused, naming the config key and the path")
    func missingFile() async throws {
        let files = try ConfigFiles()
        let path = files.path("absent.yaml")
        let error = try #require(await loadError(["--config", path]))
        #expect(error.code == .configFileNotFound)
        #expect(error.key == "config")
        #expect(error.description.contains("invalid value for config: \"\(path)\""))
        #expect(error.description.contains("no such file"))
        #expect(error.description.hasSuffix("given by --config"))
    }

    @Test("a missing file named by PROTD_CONFIG is refused too")
    func missingFileFromEnvironment() async throws {
        let error = try #require(await loadError(environment: ["PROTD_CONFIG": "/nonexistent/protd.yaml"]))
        #expect(error.code == .configFileNotFound)
        #expect(error.key == "config")
    }

    @Test("an unparseable config file is refused, naming the config key")
    func unparseableFile() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "socket: [unclosed\n  path: : :\n")
        let error = try #require(await loadError(["--config", path]))
        #expect(error.code == .configFileUnreadable)
        #expect(error.key == "config")
        #expect(error.description.contains(path))
    }

    @Test("a file that is not a mapping is refused")
    func scalarFile() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", "just a string\n")
        let error = try #require(await loadError(["--config", path]))
        #expect(error.code == .configFileUnreadable)
    }

    @Test("an unknown key in the file is refused and named")
    func unknownFileKey() async throws {
        let files = try ConfigFiles()
        let path = try files.write("protd.yaml", """
            passcode:
              erase-after-failed-attempt: 10
            socket:
              path: /tmp/ok.sock
            """)
        let error = try #require(await loadError(["--config", path]))
        #expect(error.code == .unknownKey)
        #expect(error.key == "passcode.erase-after-failed-attempt")
        #expect(error.description.contains("unknown key passcode.erase-after-failed-attempt in \(path)"))
    }

    @Test("an unknown flag is refused and named", arguments: ["--sokcet-path", "--socket-path-x=1", "-v", "--"])
    func unknownFlag(flag: String) async throws {
        let error = try #require(await loadError([flag]))
        #expect(error.code == .unknownFlag)
        #expect(error.description.contains("unknown flag \(flag.split(separator: "=").first.map(String.init) ?? flag)"))
    }

    @Test("an argument that belongs to no flag is refused")
    func strayArgument() async throws {
        let error = try #require(await loadError(["--socket", "/a.sock", "/b.sock"]))
        #expect(error.key == "socket.path")
        #expect(error.description.contains("too many values for socket.path"))
    }

    @Test("a positional argument before any flag is refused")
    func positionalArgument() async throws {
        let error = try #require(await loadError(["start", "--socket", "/a.sock"]))
        #expect(error.code == .unexpectedArgument)
        #expect(error.key == "start")
    }

    @Test("arguments start after the program name, so a program name is refused")
    func programNameIsNotExpected() async throws {
        let error = try #require(await loadError(["/usr/bin/protd", "--socket", "/a.sock"]))
        #expect(error.code == .unexpectedArgument)
        #expect(error.key == "/usr/bin/protd")
    }

    @Test("a flag value with a comma is refused with a hint to use the variable")
    func commaInFlagValue() async throws {
        let error = try #require(await loadError(["--socket-path", "/tmp/a,b.sock"]))
        #expect(error.key == "socket.path")
        #expect(error.description.contains("PROTD_SOCKET"))
    }

    @Test("a flag without its value is refused")
    func missingFlagValue() async throws {
        let error = try #require(await loadError(["--socket-path"]))
        #expect(error.key == "socket.path")
        #expect(error.description.contains("missing value for socket.path"))
    }

    @Test("a key given by both its flag and its alias is refused")
    func flagAndAlias() async throws {
        let error = try #require(await loadError(["--socket", "/a.sock", "--socket-path", "/b.sock"]))
        #expect(error.code == .duplicateFlag)
        #expect(error.key == "socket.path")
        #expect(error.description.contains("--socket and --socket-path"))
    }

    @Test("a key given twice by the same flag is refused")
    func repeatedFlag() async throws {
        let error = try #require(await loadError(["--state-dir", "/a", "--state-dir", "/b"]))
        #expect(error.code == .duplicateFlag)
        #expect(error.key == "state.directory")
    }

    @Test("an empty --config is refused")
    func emptyConfigPath() async throws {
        let error = try #require(await loadError(["--config="]))
        #expect(error.key == "config")
    }
}
