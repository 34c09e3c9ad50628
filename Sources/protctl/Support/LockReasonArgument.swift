import ArgumentParser
import DataProtection

/// A lock reason a lock request may give on the command line: `requested`
/// or `suspend` (`inactivity` and `shutdown` are protd's own).
struct LockReasonArgument: ExpressibleByArgument {
    let value: LockReason

    init(_ value: LockReason) { self.value = value }

    init?(argument: String) {
        guard let value = LockReason(rawValue: argument), value.isRequestable else { return nil }
        self.value = value
    }

    var defaultValueDescription: String { value.rawValue }

    static var allValueStrings: [String] { LockReason.allCases.filter(\.isRequestable).map(\.rawValue) }
}
