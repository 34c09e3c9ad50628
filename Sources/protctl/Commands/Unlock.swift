import ArgumentParser
import DataProtection
import Glibc

/// `protctl unlock [--stdin] [--pam]`.
struct Unlock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unlock with the passcode.",
        discussion: """
            Asks on the terminal without echo, or reads one line from standard input with --stdin \
            (a trailing newline is optional; pam_exec's trailing NUL is ignored). With no passcode set \
            there is nothing to unlock: it says so, reads nothing and exits 0. With --pam (docs/pam.md), \
            a wrong passcode counts against the failed attempts of the login user pam_exec names in \
            PAM_USER, not against the machine's count.
            """)

    @ParentCommand var root: Protctl

    @Flag(help: "Read the passcode from standard input.")
    var stdin = false

    @Flag(help: "Unlock at the login of $PAM_USER: a wrong passcode counts against that user's attempts.")
    var pam = false

    func run() async throws {
        let loginUID = try pam ? Self.pamUserID() : nil
        try await CommandContext(root).run { client in
            let status = try await client.servingStatus()
            guard status.passcodeSet else {
                if root.json {
                    Output.json(["state": status.state.rawValue, "passcodeSet": false])
                } else {
                    Output.line("no passcode is set, so there is nothing to unlock: every class is readable")
                }
                return
            }
            let passcode = try stdin ? PasscodeInput.stdinLines(1)[0] : PasscodeInput.prompt("Passcode: ")
            if let loginUID {
                try await client.unlock(passcode: passcode, atLoginOf: loginUID)
            } else {
                try await client.unlock(passcode: passcode)
            }
            let state = try await client.status().state
            if root.json { Output.json(["state": state.rawValue]) } else { Output.line("state: \(state)") }
        }
    }

    /// The uid of the user pam_exec names in `PAM_USER`.
    private static func pamUserID() throws -> UInt32 {
        guard let name = getenv("PAM_USER").map({ String(cString: $0) }), !name.isEmpty else {
            throw ValidationError("--pam needs PAM_USER, which pam_exec sets; it is not set")
        }
        guard let entry = getpwnam(name) else { throw ValidationError("--pam: no user named \(name) (PAM_USER)") }
        return entry.pointee.pw_uid
    }
}
