import ArgumentParser

/// `protctl recovery create|reset-passcode|remove`.
struct Recovery: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make, use or remove the recovery key, which sets a new passcode when it is forgotten.",
        discussion: """
            A recovery key is 256 random bits shown once as 8 groups of 8 characters. With it, anyone \
            on this machine can set a new passcode and so read every file: keep it offline.
            """,
        subcommands: [RecoveryCreate.self, RecoveryResetPasscode.self, RecoveryRemove.self])
}
