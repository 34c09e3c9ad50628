internal import Configuration
internal import Glibc
internal import ProtectionCore
internal import Sodium

extension DaemonConfiguration {
    /// Reads the configuration once, highest priority first, from:
    /// 1. command-line flags: each key `a.b-c` as `--a-b-c VALUE` or
    ///    `--a-b-c=VALUE`, plus `--socket PATH` (= `socket.path`) and
    ///    `--state-dir DIR` (= `state.directory`);
    /// 2. environment variables `PROTD_` + the key upper-cased with `.` and
    ///    `-` as `_` (`PROTD_LOCK_GRACE_PERIOD_SECONDS`); others are ignored;
    /// 3. the YAML (or JSON) file named by `--config FILE` (or
    ///    `--config=FILE`), else by `PROTD_CONFIG`; with neither, no file;
    /// 4. the defaults of `init()`.
    ///
    /// - Parameters:
    ///   - arguments: the command line after the program name
    ///     (`CommandLine.arguments.dropFirst()`). `--help`/`-h` are accepted
    ///     and ignored: check `wantsHelp(arguments:)` first.
    ///   - environment: the process environment
    ///     (`ProcessInfo.processInfo.environment`).
    /// - Throws: `ConfigurationError` naming the key at fault for an unknown
    ///   flag, a stray argument, a missing or unparseable file, a key in the
    ///   file protd does not know, or any value of the wrong type or range.
    public static func load(arguments: [String], environment: [String: String]) async throws -> DaemonConfiguration {
        let commandLine = CommandLineCheck(arguments)
        try commandLine.validate(keys: ConfigurationKey.all + [.configFile])

        let arguments = CommandLineArgumentsProvider(arguments: commandLine.providerArguments)
        let variables = EnvironmentVariablesProvider(environmentVariables: EnvironmentCheck.providerView(of: environment))
            .prefixKeys(with: "protd")
        var layers = [
            Layer(arguments, isCommandLine: true) { $0.flag },
        ]
        // One layer per alias position: `--socket` is looked up as the key
        // `socket`, `--state-dir` as `state.dir` (KeyMappingProvider).
        let aliasCount = ConfigurationKey.all.map(\.aliases.count).max() ?? 0
        for index in 0..<aliasCount {
            var aliasFor: [[String]: [String]] = [:]
            for key in ConfigurationKey.all where key.aliases.count > index {
                aliasFor[key.components] = key.aliases[index].dropFirst(2).split(separator: "-").map(String.init)
            }
            let mapping = aliasFor
            layers.append(Layer(arguments.mapKeys { key in
                AbsoluteConfigKey(mapping[key.components] ?? key.components)
            }, isCommandLine: true) { $0.aliases.count > index ? $0.aliases[index] : $0.flag })
        }
        layers.append(Layer(variables) { EnvironmentCheck.variable(setting: $0, in: environment) })

        let reader = Reader(layers: layers)
        if let found = try reader.lookup(.configFile) {
            guard found.items.count == 1, let path = ValueParsing.path(found.items[0]) else {
                throw reader.invalid(.configFile, found)
            }
            layers.append(try await fileLayer(path: path, source: found.source))
        }
        return try Reader(layers: layers).configuration()
    }

    /// Whether the command line (after the program name) asks for help
    /// (`--help` or `-h`); the caller then prints `usage` instead of calling `load`.
    public static func wantsHelp(arguments: [String]) -> Bool {
        CommandLineCheck(arguments).wantsHelp
    }

    /// Whether the arguments ask for the version (`--version`).
    public static func wantsVersion(arguments: [String]) -> Bool {
        CommandLineCheck(arguments).wantsVersion
    }

    /// The file layer: a `FileProvider<YAMLSnapshot>` (YAML 1.2 is a superset
    /// of JSON, so JSON files load too), after checking the file exists so a
    /// missing file gets its own error, and refusing keys protd does not read.
    private static func fileLayer(path: String, source: String) async throws -> Layer {
        let key = ConfigurationKey.configFile.name
        var info = stat()
        guard stat(path, &info) == 0 else {
            let reason = errno == ENOENT ? "no such file" : String(cString: strerror(errno))
            throw ConfigurationError(
                .configFileNotFound, key: key,
                message: "invalid value for \(key): \"\(path)\" (expected an existing YAML or JSON file: \(reason)), given by \(source)")
        }
        let provider: any ConfigProvider
        do {
            // FileProvider takes a SystemPackage.FilePath, which this module
            // does not import; its documented `config:` initialiser reads the
            // path from a reader instead.
            let pathReader = ConfigReader(provider: InMemoryProvider(values: [
                "filePath": ConfigValue(.string(path), isSecret: false),
            ]))
            let file = try await FileProvider<YAMLSnapshot>(config: pathReader)
            try FileKeyCheck.refuseUnknownKeys(in: file, path: path, known: ConfigurationKey.all)
            provider = file
        } catch let error as ConfigurationError {
            throw error
        } catch {
            // A file of only comments has no top-level mapping: that is an
            // empty configuration, not an error.
            guard FileKeyCheck.hasNoContent(path) else {
                throw ConfigurationError(
                    .configFileUnreadable, key: key,
                    message: "invalid value for \(key): \"\(path)\" (expected a readable YAML or JSON file), given by \(source): \(error)")
            }
            provider = InMemoryProvider(name: path, values: [:])
        }
        return Layer(provider) { "\($0.name) in \(path)" }
    }
}

/// One source of values, highest priority first.
struct Layer: Sendable {
    /// Where the values come from.
    let provider: any ConfigProvider
    /// Whether the values are command-line flags.
    let isCommandLine: Bool
    /// Names the flag, variable or file entry that set a key, for messages.
    let source: @Sendable (ConfigurationKey) -> String

    init(_ provider: any ConfigProvider, isCommandLine: Bool = false,
         source: @escaping @Sendable (ConfigurationKey) -> String) {
        self.provider = provider
        self.isCommandLine = isCommandLine
        self.source = source
    }
}

/// Looks keys up through the layers and parses them strictly.
///
/// Why not `ConfigReader`: its getters with a default return the default
/// when a provider holds a malformed value (the error only reaches an access
/// reporter), and its required getters throw a `package` error type that
/// cannot tell "missing" from "malformed". protd must refuse to start on a
/// bad value, so this asks the providers directly, in the same precedence
/// order `ConfigReader` uses (first provider with a value wins; a provider
/// that fails stops the lookup), and parses every value from text itself.
struct Reader {
    let layers: [Layer]

    /// A value as found: its text (one item, or several for a list) and
    /// where it came from.
    struct Found {
        var items: [String]
        var source: String
        var text: String { items.joined(separator: ",") }
    }

    /// The first layer's value for `key`, or nil when no layer has one.
    func lookup(_ key: ConfigurationKey) throws -> Found? {
        let absoluteKey = AbsoluteConfigKey(key.components)
        for layer in layers {
            let result: LookupResult
            do {
                result = try layer.provider.value(forKey: absoluteKey, type: key.isList ? .stringArray : .string)
            } catch {
                var expected = (key.isList ? "a list: " : "a single value: ") + key.expected
                if !key.isList && layer.isCommandLine {
                    // CommandLineArgumentsProvider splits every flag value at commas.
                    expected += "; a comma separates list items on the command line, so give a value"
                        + " with a comma as \(key.environmentVariable) or in the file"
                }
                throw ConfigurationError.invalidValue(key.name, raw: nil, expected: expected, source: layer.source(key))
            }
            guard let value = result.value else { continue }
            switch value.content {
            case .string(let text):
                return Found(items: [text], source: layer.source(key))
            case .stringArray(let items):
                return Found(items: items, source: layer.source(key))
            default:
                throw ConfigurationError.invalidValue(key.name, raw: nil, expected: key.expected,
                                                      source: layer.source(key))
            }
        }
        return nil
    }

    /// The parsed value of a single-value key, or nil when no layer sets it.
    func single<T>(_ key: ConfigurationKey, _ parse: (String) -> T?) throws -> T? {
        guard let found = try lookup(key) else { return nil }
        guard found.items.count == 1, let value = parse(found.items[0]) else {
            throw invalid(key, found)
        }
        return value
    }

    /// The parsed value of a list key, or nil when no layer sets it.
    func list<T>(_ key: ConfigurationKey, _ parse: ([String]) -> T?) throws -> T? {
        guard let found = try lookup(key) else { return nil }
        guard let value = parse(found.items) else { throw invalid(key, found) }
        return value
    }

    func invalid(_ key: ConfigurationKey, _ found: Found) -> ConfigurationError {
        .invalidValue(key.name, raw: found.text, expected: key.expected, source: found.source)
    }

    /// Every key read and checked, starting from the defaults.
    func configuration() throws -> DaemonConfiguration {
        var configuration = DaemonConfiguration()
        if let value = try single(.socketPath, ValueParsing.socketPath) { configuration.socketPath = value }
        if let value = try single(.socketMode, ValueParsing.mode) { configuration.socketMode = value }
        if let value = try single(.socketGroup, ValueParsing.optionalGroupName) { configuration.socketGroup = value }
        if let value = try single(.stateDirectory, ValueParsing.path) { configuration.stateDirectory = value }
        if let value = try single(.deviceKeyFile, ValueParsing.optionalPath) { configuration.deviceKeyFile = value }
        if let value = try single(.gracePeriod, ValueParsing.graceSeconds) { configuration.gracePeriod = value }
        if let value = try single(.firstUnlockTimeout, ValueParsing.firstUnlockTimeout) {
            configuration.firstUnlockTimeout = value
        }
        if let value = try single(.adminGroup, ValueParsing.groupName) { configuration.adminGroup = value }
        configuration.passcodeCost = try passcodeCost(default: configuration.passcodeCost)
        configuration.failedAttemptPolicy = try failedAttemptPolicy(default: configuration.failedAttemptPolicy)
        let limits = DaemonConfiguration.Limits.self
        if let value = try single(.segmentSize, ValueParsing.integer(in: limits.segmentSizes)) {
            configuration.segmentSize = value
        }
        if let value = try single(.cipher, ValueParsing.cipher) { configuration.cipher = value }
        if let value = try single(.logLevel, ValueParsing.logLevel) { configuration.logLevel = value }
        if let value = try single(.maxFrameBytes, ValueParsing.integer(in: limits.minimumFrameBytes...limits.maximumFrameBytes)) {
            configuration.maxFrameBytes = value
        }
        if let value = try single(.maxConnections, ValueParsing.integer(atLeast: 1)) {
            configuration.maxConnections = value
        }
        if let value = try single(.maxOpenHandlesPerConnection, ValueParsing.integer(atLeast: 1)) {
            configuration.maxOpenHandlesPerConnection = value
        }
        let perUID: [(ConfigurationKey, WritableKeyPath<DaemonConfiguration, Int>, Int)] = [
            (.maxConnectionsPerUID, \.maxConnectionsPerUID, 1), (.maxOpenHandlesPerUID, \.maxOpenHandlesPerUID, 1),
            (.maxSubscribersPerUID, \.maxSubscribersPerUID, 1),
            (.quotaBytesPerUID, \.quotaBytesPerUID, 0), (.quotaFilesPerUID, \.quotaFilesPerUID, 0),
        ]
        for (key, property, minimum) in perUID {
            if let value = try single(key, ValueParsing.integer(atLeast: minimum)) { configuration[keyPath: property] = value }
        }
        if let value = try single(.requireLockedMemory, ValueParsing.boolean) { configuration.requireLockedMemory = value }
        return configuration
    }

    /// Operations and KiB, each checked against libsodium's limits so the
    /// message names the key that is out of range.
    private func passcodeCost(default cost: Argon2id.Cost) throws -> Argon2id.Cost {
        let operationsFound = try lookup(.argon2Operations)
        let memoryFound = try lookup(.argon2MemoryKiB)
        var cost = cost
        if let found = operationsFound {
            guard found.items.count == 1, let operations = ValueParsing.unsigned(found.items[0]),
                  (try? Argon2id.Cost(operations: operations, memoryBytes: Argon2id.Cost.minimum.memoryBytes).validate()) != nil
            else { throw invalid(.argon2Operations, found) }
            cost.operations = operations
        }
        if let found = memoryFound {
            guard found.items.count == 1, let kib = ValueParsing.unsigned(found.items[0]) else {
                throw invalid(.argon2MemoryKiB, found)
            }
            let (bytes, overflow) = kib.multipliedReportingOverflow(by: 1024)
            guard !overflow,
                  (try? Argon2id.Cost(operations: Argon2id.Cost.minimum.operations, memoryBytes: bytes).validate()) != nil
            else { throw invalid(.argon2MemoryKiB, found) }
            cost.memoryBytes = bytes
        }
        do {
            try cost.validate()
        } catch {
            // Unreachable while each half is checked above; kept so a future
            // rule in `validate()` still stops loading with a named key.
            let key = ConfigurationKey.argon2Operations.name
            throw ConfigurationError(
                .invalidValue, key: key,
                message: "invalid value for \(key) and \(ConfigurationKey.argon2MemoryKiB.name): \(error)")
        }
        return cost
    }

    /// Delays and erase-after-N as one `FailedAttemptPolicy`.
    private func failedAttemptPolicy(default policy: FailedAttemptPolicy) throws -> FailedAttemptPolicy {
        let delays = try list(.failedAttemptDelays, ValueParsing.delays) ?? policy.delaysInSeconds
        let eraseAfter = try single(.eraseAfterFailedAttempts, ValueParsing.integer(atLeast: 0))
            .map { $0 == 0 ? nil : $0 } ?? policy.eraseAfter
        do {
            return try FailedAttemptPolicy(delaysInSeconds: delays, eraseAfter: eraseAfter)
        } catch {
            // Unreachable while the parsers above enforce the same rules.
            throw ConfigurationError.invalidValue(ConfigurationKey.failedAttemptDelays.name,
                                                  raw: delays.map(String.init).joined(separator: ","),
                                                  expected: "\(error)", source: nil)
        }
    }
}
