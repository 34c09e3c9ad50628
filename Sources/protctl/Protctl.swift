import ArgumentParser
import ProtectionVersion

/// protctl: administer protd and use its files from scripts.
@main
struct Protctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protctl",
        abstract: "Administer the protd data-protection daemon and use its files.",
        discussion: """
            Exit codes: 0 ok, 64 usage, 65 integrity failure or problem found, 66 no such file, 69 daemon \
            unreachable, 73 cannot write the read output, 75 protected data unavailable or rate-limited (retry later), 77 wrong \
            passcode or recovery key, or not permitted, 78 configuration error, 1 anything else.
            """,
        version: "protctl \(ProtdVersion.current)",
        subcommands: [
            Status.self, Lock.self, Unlock.self, Passwd.self, Recovery.self, Erase.self, Check.self,
            Write.self, Read.self, List.self, Remove.self, Protection.self, Watch.self,
        ])

    @Option(name: .long, help: ArgumentHelp(
        "The daemon's socket (default: $PROTD_SOCKET, else /run/protd/protd.sock).", valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Print machine-readable JSON on stdout (JSON lines for watch).")
    var json = false
}
