import ArgumentParser
import DataProtection

/// A protection class on the command line: `none`, `untilFirstUserAuthentication`,
/// `unlessOpen`, `complete`, or the full API names.
struct ProtectionArgument: ExpressibleByArgument {
    let value: FileProtection

    init?(argument: String) {
        guard let value = FileProtection(name: argument) else { return nil }
        self.value = value
    }

    static var allValueStrings: [String] {
        ["none", "untilFirstUserAuthentication", "unlessOpen", "complete",
         "completeUntilFirstUserAuthentication", "completeUnlessOpen"]
    }
}
