/// A file some caller has open: its shared file, its handles and the
/// callers using it without a handle.
struct OpenFileEntry {
    let file: SharedOpenFile
    var handles: Set<UInt64>
    /// Callers using `file` without a handle: one-off calls by name
    /// (`read`, `setProtection`) and handles still being opened. It
    /// stays open until they are done too.
    var transientUsers = 0

    var isUnused: Bool { handles.isEmpty && transientUsers == 0 }
}

/// The store's open files by inode, kept under the store's state lock,
/// with an index of their shared files under a lock of its own. The index
/// answers "is this inode open, and at what size" (`list`, a quota
/// measurement) without the state lock: a handle call measuring the quota
/// holds its file's lock, and a completing lock holds the state lock while
/// it closes files, so the two must never wait for each other's lock.
struct OpenFileTable: Sequence {
    private var entries: [FileIdentity: OpenFileEntry] = [:]
    typealias Index = LockedState<[FileIdentity: SharedOpenFile]>
    /// The shared file of each open inode; no other lock is taken while
    /// it is held.
    let index = Index([:])

    subscript(identity: FileIdentity) -> OpenFileEntry? {
        get { entries[identity] }
        set {
            entries[identity] = newValue
            index.withLock { $0[identity] = newValue?.file }
        }
    }

    mutating func removeValue(forKey identity: FileIdentity) {
        self[identity] = nil
    }

    func makeIterator() -> Dictionary<FileIdentity, OpenFileEntry>.Iterator { entries.makeIterator() }
}
