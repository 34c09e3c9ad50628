internal import Glibc

/// Moves the files of the first store layout, whose paths showed uids and
/// names (`ROOT/<uid>/files/<name>`), to sealed names (docs/FORMAT.md 4.6).
/// Runs at start, before anything else uses the store. Each file moves
/// with one rename, so a crash or kill at any point leaves every file
/// under its old path or its new one, and the next start moves the rest;
/// a legacy directory goes once it is empty. Contents and headers do not
/// change: a header is bound to the file's name, not to its path.
enum LegacyLayoutMigration {
    /// What a run did.
    struct Outcome: Equatable {
        /// Files renamed to their sealed paths.
        var moved = 0
        /// Legacy entries left in place: not a valid name, not a regular
        /// file, or their sealed path is taken already.
        var leftBehind = 0
        /// The legacy directories (`ROOT/<uid>/files`) they are in: their
        /// paths, which hold names, are not logged.
        var leftBehindIn: [String] = []
        /// Directories whose entries changed, to fsync at the end.
        fileprivate var touched: Set<String> = []
    }

    /// Moves every legacy namespace's files in `files`' store; runs after
    /// `FileStore.removeLeftoverTemporaryFiles` emptied their `tmp`.
    static func run(_ files: FileStore) throws -> Outcome {
        var outcome = Outcome()
        guard Posix.exists(files.root) else { return outcome }
        for entry in try Posix.listDirectory(files.root) {
            guard let uid = UInt32(entry), String(uid) == entry, isDirectory(files.root + "/" + entry) else { continue }
            let legacy = files.root + "/" + entry
            let namespace = Namespace(uid: uid)
            let leftBefore = outcome.leftBehind
            if isDirectory(legacy + "/files") {
                try move(legacy + "/files", relative: "", to: namespace, files, &outcome)
                if outcome.leftBehind > leftBefore { outcome.leftBehindIn.append(legacy + "/files") }
            }
            removeEmptyDirectories(legacy)
        }
        // Each rename is atomic; syncing the directories once at the end
        // makes the run durable without a sync per file.
        for directory in outcome.touched where Posix.exists(directory) { try Posix.fsyncDirectory(directory) }
        outcome.touched = []
        return outcome
    }

    private static func move(_ directory: String, relative: String, to namespace: Namespace,
                             _ files: FileStore, _ outcome: inout Outcome) throws {
        for entry in try Posix.listDirectory(directory) {
            let legacy = directory + "/" + entry
            let name = relative.isEmpty ? entry : relative + "/" + entry
            var info = stat()
            guard lstat(legacy, &info) == 0 else { continue }
            if (info.st_mode & S_IFMT) == S_IFDIR {
                try move(legacy, relative: name, to: namespace, files, &outcome)
                continue
            }
            guard (info.st_mode & S_IFMT) == S_IFREG, let fileName = try? FileName(name) else {
                outcome.leftBehind += 1
                continue
            }
            let sealed = try files.pathCreatingParents(for: fileName, in: namespace)
            guard !Posix.exists(sealed) else {
                outcome.leftBehind += 1
                continue
            }
            try Posix.rename(legacy, sealed)
            outcome.moved += 1
            outcome.touched.formUnion([directory, Posix.parentDirectory(of: sealed)])
        }
    }

    /// Removes `directory` and the directories below it that are empty,
    /// deepest first; anything left behind keeps its directories.
    private static func removeEmptyDirectories(_ directory: String) {
        for entry in (try? Posix.listDirectory(directory)) ?? [] where isDirectory(directory + "/" + entry) {
            removeEmptyDirectories(directory + "/" + entry)
        }
        rmdir(directory)
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}
