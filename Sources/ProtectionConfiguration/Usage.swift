extension DaemonConfiguration {
    /// The `--help` text: every flag, its configuration key, environment
    /// variable, type and default, generated from the same table `load` reads.
    public static let usage: String = {
        var lines = [
            "Usage: protd [--config FILE] [--KEY VALUE | --KEY=VALUE]...",
            "",
            "Settings are read once at start, highest priority first: command-line flags,",
            "PROTD_* environment variables, the YAML (or JSON) file given by --config FILE",
            "or PROTD_CONFIG, then the defaults below. With neither --config nor",
            "PROTD_CONFIG no file is read. Each key a.b-c is the flag --a-b-c and the",
            "variable PROTD_A_B_C; in the file it is written `a: { b-c: VALUE }`.",
            "",
        ]
        for key in [ConfigurationKey.configFile] + ConfigurationKey.all {
            let flags = key.flags.map { "\($0) \(key.placeholder)" }.joined(separator: ", ")
            lines.append("  \(flags)")
            let keyText = key == .configFile ? "" : "key \(key.name), "
            lines.append("      \(keyText)env \(key.environmentVariable), \(key.type), default \(key.defaultText)")
            lines.append("      \(key.help)")
        }
        lines.append("  --help, -h")
        lines.append("      Print this text and exit.")
        lines.append("  --version")
        lines.append("      Print the version, the libsodium linked and the cipher new files get here, and exit.")
        return lines.joined(separator: "\n") + "\n"
    }()
}
