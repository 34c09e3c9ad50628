/// The `PROTD_*` environment variables: which one sets a key, and what to
/// warn about at start (a variable protd does not know, a deprecated name).
enum EnvironmentCheck {
    /// The environment as the variables provider must see it: a key's
    /// `variableOverride` (`PROTD_SOCKET`) stands in for its derived name
    /// (`PROTD_SOCKET_PATH`, deprecated), and wins when both are set.
    static func providerView(of environment: [String: String]) -> [String: String] {
        var view = environment
        for key in ConfigurationKey.all {
            guard let override = key.variableOverride, let value = environment[override] else { continue }
            view[key.derivedEnvironmentVariable] = value
        }
        return view
    }

    /// The variable that set `key`, for messages.
    static func variable(setting key: ConfigurationKey, in environment: [String: String]) -> String {
        if let override = key.variableOverride, environment[override] != nil { return override }
        return key.derivedEnvironmentVariable
    }

    /// Every variable protd reads.
    static var known: Set<String> {
        Set(([ConfigurationKey.configFile] + ConfigurationKey.all).flatMap {
            [$0.environmentVariable, $0.derivedEnvironmentVariable]
        })
    }

    /// One sentence per `PROTD_*` variable protd does not know, and per
    /// deprecated name in use, sorted.
    static func warnings(for environment: [String: String]) -> [String] {
        var warnings: [String] = []
        for name in environment.keys where name.hasPrefix("PROTD_") && !known.contains(name) {
            warnings.append("the environment variable \(name) is not one protd reads, so it has no effect; "
                            + "protd --help lists the variables it reads")
        }
        for key in ConfigurationKey.all {
            guard let override = key.variableOverride, environment[key.derivedEnvironmentVariable] != nil else { continue }
            let winner = environment[override] != nil ? "; \(override) is set too and wins" : ""
            warnings.append("the environment variable \(key.derivedEnvironmentVariable) is deprecated; "
                            + "use \(override), which the client library reads too\(winner)")
        }
        return warnings.sorted()
    }
}

extension DaemonConfiguration {
    /// What protd should warn about in its environment at start, one
    /// sentence each: `PROTD_*` variables it does not know, deprecated names.
    public static func environmentWarnings(_ environment: [String: String]) -> [String] {
        EnvironmentCheck.warnings(for: environment)
    }
}
