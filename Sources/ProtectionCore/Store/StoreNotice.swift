/// What the store did on its own while opening or running, for the log:
/// a device secret change, a key bag's permissions put right, leftovers of
/// interrupted creates removed. Paths, modes and counts only, never a
/// secret.
public enum StoreNotice: Sendable, Equatable, CustomStringConvertible {
    /// The key bag was rewrapped under the configured device secret; it
    /// had been under the one at this path.
    case migrated(former: String)
    /// The key bag is under the former device secret at this path: a
    /// passcode is set, so the rewrap waits for the next unlock.
    case pendingUntilUnlock(former: String)
    /// A former device secret file, which nothing needs any more, was
    /// overwritten and removed.
    case destroyedFormer(String)
    /// A device secret change step failed; what is on disk still opens,
    /// and it is tried again.
    case failed(String)
    /// The key bag at this path could be read or written by others (this
    /// mode); it was set to 0600.
    case keyBagModeFixed(path: String, mode: UInt32)
    /// Temporary files of this many creates and whole-file writes that a
    /// crash or kill interrupted were removed at start.
    case removedInterruptedWrites(Int)
    /// A run of `HeaderRewrap` (new class keys after the first passcode,
    /// binding version 1 files to their names): whether its jobs are done.
    case headersRewritten(rewritten: Int, damaged: [String], unfinished: [String], finished: Bool)
    /// Files of the first store layout (uids and names in clear) were
    /// moved to sealed names; `leftBehind` legacy entries stay, in the
    /// legacy directories `in` (their own paths hold names: not logged).
    case namesSealed(moved: Int, leftBehind: Int, in: [String])

    public var description: String {
        switch self {
        case .migrated(let former):
            "device secret: rewrapped the key bag under the configured device secret (it was under \(former))"
        case .pendingUntilUnlock(let former):
            "device secret: the key bag is under the former device secret \(former); a passcode is set, "
                + "so it is rewrapped under the configured one at the next unlock"
        case .destroyedFormer(let path):
            "device secret: overwrote and removed the former device secret \(path), which the key bag no longer needs"
        case .failed(let reason):
            "device secret: changing the device secret did not finish: \(reason)"
        case .keyBagModeFixed(let path, let mode):
            "the key bag \(path) had mode \(String(mode, radix: 8)), open to other users; set it to 600"
        case .removedInterruptedWrites(let count):
            "removed the temporary files of \(count) creates or writes that a crash or kill interrupted"
        case .headersRewritten(let rewritten, let damaged, let unfinished, let finished):
            "rewrote the headers of \(rewritten) files (under the class keys the first passcode made, bound to "
                + "their names and owners)"
                + (damaged.isEmpty ? "" : "; \(damaged.count) do not open and stay as they are "
                   + "(in \(Set(damaged).sorted().prefix(5).joined(separator: ", ")); protctl check lists them)")
                + (finished ? "" : "; the rest waits for the next unlock: "
                   + (unfinished.isEmpty ? "a create or write that took the replaced class keys was still running"
                      : unfinished.prefix(5).joined(separator: "; ")))
        case .namesSealed(let moved, let leftBehind, let directories):
            "moved \(moved) files from the older store layout, whose paths showed uids and names, to sealed names"
                + (leftBehind == 0 ? "" : "; \(leftBehind) entries stay where they are, as they are not "
                   + "protd files or their new path is taken (under \(directories.prefix(5).joined(separator: ", ")))")
        }
    }

    /// Whether this is a warning rather than a notice: a failure, a key
    /// bag that was open to others, or a plain device secret file still
    /// on disk beside the configured credential.
    public var isWarning: Bool {
        switch self {
        case .failed, .keyBagModeFixed, .pendingUntilUnlock: true
        case .headersRewritten(_, let damaged, _, let finished): !finished || !damaged.isEmpty
        case .namesSealed(_, let leftBehind, _): leftBehind > 0
        case .migrated, .destroyedFormer, .removedInterruptedWrites: false
        }
    }
}
