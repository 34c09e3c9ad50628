import DataProtection

/// What a whole-file name holds: a version of `VersionContent` in a class.
struct WholeState: Equatable, CustomStringConvertible {
    var version: Int
    var protection: ProtectionClass
    var description: String { "v\(version) \(protection)" }
}

/// One name a worker writes whole (creates, writes, class changes,
/// deletes). Only its worker touches it, so its history is a sequence:
/// the state after the last acknowledged operation, and what the one
/// operation in flight at the kill would leave if it took effect.
struct WholeFile {
    let name: String
    /// nil: absent.
    var acknowledged: WholeState?
    /// Set while an operation is in flight (its outcome, nil for a delete).
    var inFlight: WholeState?? = .none
    /// The next version number a write uses (never reused, even for a write cut short).
    var nextVersion = 1

    /// The states a restart may show.
    var candidates: [WholeState?] {
        if case .some(let outcome) = inFlight { return [acknowledged, outcome] }
        return [acknowledged]
    }
}

/// A byte range some handle write covered since the last acknowledged sync.
struct Dirty {
    var range: Range<Int>
}

/// One name a worker writes through a handle (writes at offsets, syncs).
struct HandleFile {
    let name: String
    /// nil: not created yet; the create may be in flight (`createInFlight`).
    var exists = false
    var createInFlight = false
    /// The content as of the last acknowledged sync (or the create, which is durable).
    var synced: [UInt8] = []
    /// The content after every acknowledged write.
    var current: [UInt8] = []
    /// Writes since the last acknowledged sync, acknowledged or in flight.
    var dirty: [Dirty] = []
    /// The largest size an in-flight or acknowledged write may have left.
    var maximumSize = 0
}

/// The names raced for with `open(.create)` by every worker in one round.
struct RaceName {
    var winners = 0
    var inFlight = 0
}
