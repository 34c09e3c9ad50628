/// The four data-protection classes, named as in Apple's `FileProtectionType`.
///
/// The raw value is the byte stored in a file header (the iOS class number).
public enum ProtectionClass: UInt8, Sendable, CaseIterable, Hashable, Codable, CustomStringConvertible {
    /// Class A: readable only while unlocked; open handles die at lock.
    case complete = 1
    /// Class B: creatable at any time; existing files readable only while
    /// unlocked; handles opened earlier keep working after a lock.
    case completeUnlessOpen = 2
    /// Class C (the default): readable from the first unlock after start
    /// until the daemon stops or nobody unlocked for the first-unlock timeout.
    case completeUntilFirstUserAuthentication = 3
    /// Class D: always readable; encrypted under a key from the device secret.
    case none = 4

    /// The class new files get when none is asked for.
    public static let `default`: ProtectionClass = .completeUntilFirstUserAuthentication

    /// The API name, e.g. `completeUnlessOpen`.
    public var description: String {
        switch self {
        case .complete: "complete"
        case .completeUnlessOpen: "completeUnlessOpen"
        case .completeUntilFirstUserAuthentication: "completeUntilFirstUserAuthentication"
        case .none: "none"
        }
    }

    /// Parses an API name or its short form (`unlessOpen`,
    /// `untilFirstUserAuthentication`); `nil` for anything else.
    public init?(name: String) {
        switch name {
        case "complete": self = .complete
        case "completeUnlessOpen", "unlessOpen": self = .completeUnlessOpen
        case "completeUntilFirstUserAuthentication", "untilFirstUserAuthentication":
            self = .completeUntilFirstUserAuthentication
        case "none": self = .none
        default: return nil
        }
    }
}
