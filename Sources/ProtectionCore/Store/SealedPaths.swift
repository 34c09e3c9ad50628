/// The on-disk entries (`StoreNames`) of file names under the store's
/// current name keys. It remembers the entries of the directories it
/// sealed last, up to `rememberedEntries` entries in all: every file in a
/// directory shares them, and sealing each of a name's components again
/// on every request cost about 5% of small-file read throughput for names
/// two directories deep. An erase's new keys (`use`) forget them all.
final class SealedPaths: Sendable {
    /// A directory: the logical path of its components in one namespace,
    /// as bytes. (Swift's `String` compares by Unicode canonical
    /// equivalence, so "caf\u{E9}" and "cafe\u{301}", two different
    /// directories here, would be one key.)
    private struct Directory: Hashable {
        let uid: UInt32
        let path: [UInt8]
    }

    private struct State {
        var names: StoreNames
        var directories: [Directory: [StoreNames.Entry]] = [:]
        /// The entries in `directories`, all directories together.
        var entryCount = 0
        /// Bumped by every `use`, so entries sealed under the keys before
        /// it are not remembered after it.
        var generation: UInt64 = 0
    }

    /// How many entries are remembered, counted per component so that deep
    /// or long names cannot make the memory large: at most about 3 MiB
    /// with the longest components (their sidecar bytes and the directory
    /// paths included). When it is full all are forgotten at once: a store
    /// of more directories than this seals their names again, as it would
    /// without the memory.
    static let rememberedEntries = 4096

    private let state: LockedState<State>

    init(_ names: StoreNames) {
        state = LockedState(State(names: names))
    }

    /// The name keys in use.
    var names: StoreNames { state.withLock { $0.names } }

    /// How many entries are remembered now (for tests).
    var rememberedEntryCount: Int { state.withLock { $0.entryCount } }

    /// Seals with `names` from now on (after an erase made new keys).
    func use(_ names: StoreNames) {
        state.withLock { $0 = State(names: names, generation: $0.generation + 1) }
    }

    /// The entries of `name`'s components in `uid`'s namespace, from the top.
    func entries(of name: FileName, uid: UInt32) throws -> [StoreNames.Entry] {
        var components = PathBytes.components(name.value)
        let last = components.removeLast()
        let parent = components.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
        let directory = Directory(uid: uid, path: Array(parent.utf8))
        let (names, remembered, generation) = state.withLock { ($0.names, $0.directories[directory], $0.generation) }
        var entries: [StoreNames.Entry]
        if components.isEmpty {
            entries = []
        } else if let remembered {
            entries = remembered
        } else {
            entries = try Self.entries(of: components, uid: uid, names: names)
            state.withLock { state in
                // A directory has at most `FileName.maxByteCount / 2`
                // components, far fewer than the memory holds.
                guard state.generation == generation, state.directories[directory] == nil else { return }
                if state.entryCount + entries.count > Self.rememberedEntries {
                    state.directories.removeAll()
                    state.entryCount = 0
                }
                state.directories[directory] = entries
                state.entryCount += entries.count
            }
        }
        entries.append(try names.entry(for: last, parent: parent, uid: uid))
        return entries
    }

    /// The entries of the directory whose components are `components`.
    private static func entries(of components: [ArraySlice<UInt8>], uid: UInt32,
                                names: StoreNames) throws -> [StoreNames.Entry] {
        var entries: [StoreNames.Entry] = []
        var parent = ""
        for component in components {
            entries.append(try names.entry(for: component, parent: parent, uid: uid))
            let text = String(decoding: component, as: UTF8.self)
            parent = parent.isEmpty ? text : parent + "/" + text
        }
        return entries
    }
}
