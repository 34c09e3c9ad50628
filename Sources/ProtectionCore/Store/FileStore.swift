internal import Glibc

/// Where protected files live on disk: `ROOT/<namespace>/files/<entries>`,
/// with `ROOT/<namespace>/tmp/` for atomic writes on the same file system.
/// Namespace and path component names are sealed (`StoreNames`), so the
/// disk shows neither uids nor names. Knows paths, names and metadata;
/// knows the name keys but no class key.
struct FileStore: Sendable {
    /// The store root (`<state>/store`).
    let root: String
    /// The directories of namespaces that exist already (checking them on
    /// every operation cost two mkdir calls per path component), as of
    /// `generation`, which every `forgetNamespaces` bumps.
    private let preparedNamespaces = LockedState<(directories: [UInt32: String], generation: UInt64)>(([:], 0))
    /// The keys that name entries, which an erase replaces, and the
    /// entries of recently used directories.
    private let sealedPaths: SealedPaths

    init(root: String, names: StoreNames) {
        self.root = root
        sealedPaths = SealedPaths(names)
    }

    /// The name keys in use.
    var names: StoreNames { sealedPaths.names }

    /// Names entries with `names` from now on (after an erase made new keys).
    func useNames(_ names: StoreNames) {
        sealedPaths.use(names)
        forgetNamespaces()
    }

    /// `ROOT/<sealed uid>`, whether or not it exists.
    func namespaceDirectory(_ namespace: Namespace) throws -> String {
        if let known = preparedNamespaces.withLock({ $0.directories[namespace.uid] }) { return known }
        return root + "/" + (try names.namespaceEntry(namespace.uid))
    }

    /// `namespaceDirectory`, after making it with its `files` and `tmp`.
    private func preparedNamespaceDirectory(_ namespace: Namespace) throws -> String {
        let (known, generation) = preparedNamespaces.withLock { ($0.directories[namespace.uid], $0.generation) }
        if let known { return known }
        let directory = try namespaceDirectory(namespace)
        try Posix.makeDirectories(directory + "/tmp")
        try Posix.makeDirectories(directory + "/files")
        preparedNamespaces.withLock { prepared in
            // An erase that removed everything meanwhile may have taken
            // these directories too: then they are made again next time.
            if prepared.generation == generation { prepared.directories[namespace.uid] = directory }
        }
        return directory
    }

    /// The directory of `namespace`'s files, whether or not it exists.
    func filesDirectory(_ namespace: Namespace) throws -> String { try namespaceDirectory(namespace) + "/files" }

    /// The path of `name`, after making sure its namespace exists.
    func path(for name: FileName, in namespace: Namespace) throws -> String {
        _ = try preparedNamespaceDirectory(namespace)
        return try location(of: name, in: namespace)
    }

    /// The path of `name`, whether or not it or its namespace exists.
    func location(of name: FileName, in namespace: Namespace) throws -> String {
        try filesDirectory(namespace) + "/" + (try entries(of: name, in: namespace)).map(\.name).joined(separator: "/")
    }

    /// The entries of `name`'s components, from the top.
    private func entries(of name: FileName, in namespace: Namespace) throws -> [StoreNames.Entry] {
        try sealedPaths.entries(of: name, uid: namespace.uid)
    }

    /// Forgets which namespaces exist (after everything was removed).
    func forgetNamespaces() {
        preparedNamespaces.withLock { prepared in
            prepared.directories.removeAll()
            prepared.generation += 1
        }
    }

    /// Like `path(for:in:)`, also creating the name's parent directories
    /// and the sidecars of its long components, each sidecar before its
    /// entry (so no entry is ever without its name). A directory is made
    /// (with those above it) only where a sidecar must go in, and for the
    /// file's own: one system call when they exist, the common case.
    func pathCreatingParents(for name: FileName, in namespace: Namespace) throws -> String {
        var path = try preparedNamespaceDirectory(namespace) + "/files"
        let entries = try entries(of: name, in: namespace)
        for (index, entry) in entries.enumerated() {
            if let sidecar = entry.sidecar {
                if index > 0 { try Posix.makeDirectories(path) }
                let sidecarPath = path + "/" + entry.name + StoreNames.sidecarSuffix
                if !Posix.exists(sidecarPath) {
                    try atomicWriter(for: namespace).write(sidecar, to: sidecarPath, durable: true)
                }
            }
            path += "/" + entry.name
        }
        if entries.count > 1 { try Posix.makeDirectories(PathBytes.parent(of: path)) }
        return path
    }

    /// An atomic writer whose temporary files are in `namespace`'s scratch directory.
    func atomicWriter(for namespace: Namespace) throws -> AtomicFileWriter {
        AtomicFileWriter(scratchDirectory: try preparedNamespaceDirectory(namespace) + "/tmp")
    }

    /// Class and size of an inode as its open handles know them, or `nil`
    /// when none has it open (`ProtectedStore` answers).
    typealias OpenFileAttributes = (FileIdentity) -> (protection: ProtectionClass, size: Int)?

    /// Class, size and modification time read from the header and the
    /// file length; no key is needed. When handles have the file open,
    /// `openFile` gives class and size instead: a handle's write changes
    /// the file length segment by segment, so the length alone can be one
    /// the file never had, or not whole segments at all.
    func attributes(of name: FileName, in namespace: Namespace, openFile: OpenFileAttributes) throws -> FileAttributes {
        try attributes(of: name, at: try path(for: name, in: namespace), in: namespace, openFile: openFile)
    }

    /// `attributes(of:in:openFile:)` for the file at `path`, where `name` is.
    func attributes(of name: FileName, at path: String, in namespace: Namespace,
                    openFile: OpenFileAttributes) throws -> FileAttributes {
        let fd = try Posix.open(path, O_RDONLY | O_NOFOLLOW)
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Posix.error("stat", name.value) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw ProtectionError(.notFound, "\(name) is not a file") }
        let read = Result { try EncryptedFile.readHeader(fd: fd, path: path, binding: FileBinding(name, in: namespace)) }
        // Asked after reading the disk: whoever wrote to the file meanwhile
        // (a handle, a class change) was its user before the first write.
        if let open = openFile(FileIdentity(info)) {
            return FileAttributes(name: name, protection: open.protection, size: open.size,
                                  modificationTime: Int64(info.st_mtim.tv_sec))
        }
        let header = try read.get()
        guard let size = SegmentLayout(segmentSize: header.segmentSize, cipher: header.algorithm).plaintextSize(forFileLength: Int(info.st_size)) else {
            throw ProtectionError.integrity("\(name): file length does not match whole segments")
        }
        return FileAttributes(name: name, protection: header.protection, size: size,
                              modificationTime: Int64(info.st_mtim.tv_sec))
    }

    /// Every file in `namespace` whose name starts with `prefix`, sorted by
    /// name. Entries that are not protd files are skipped.
    func list(in namespace: Namespace, prefix: String, openFile: OpenFileAttributes) throws -> [FileAttributes] {
        try files(in: namespace, prefix: prefix).compactMap { file in
            try? attributes(of: file.name, at: file.path, in: namespace, openFile: openFile)
        }
    }

    /// The names of the regular files in `namespace` starting with
    /// `prefix`, sorted. The walk starts in the directory of the prefix's
    /// whole components and descends only where a match can be, so its
    /// cost follows the entries under the prefix, not the namespace.
    /// Entries that stand for no name there (not protd's, or moved or
    /// copied from elsewhere on disk) are skipped; `StoreCheck` reports them.
    func names(in namespace: Namespace, prefix: String) throws -> [FileName] {
        try files(in: namespace, prefix: prefix).map(\.name)
    }

    /// `names(in:prefix:)` with each file's path, as the walk found it.
    private func files(in namespace: Namespace, prefix: String) throws -> [(name: FileName, path: String)] {
        let names = self.names
        var start = PathBytes.components(prefix).map { String(decoding: $0, as: UTF8.self) }
        if !start.isEmpty { start.removeLast() }  // the partial last component, or "" after a trailing "/"
        var directory = try filesDirectory(namespace)
        if !start.isEmpty {
            guard let whole = try? FileName(start.joined(separator: "/")) else { return [] }
            directory += "/" + (try entries(of: whole, in: namespace)).map(\.name).joined(separator: "/")
        }
        guard Posix.exists(directory) else { return [] }
        var results: [(name: FileName, path: String)] = []
        func walk(_ relative: String, in directory: String) throws {
            for entry in try Posix.listDirectory(directory) {
                guard let component = names.component(of: entry, parent: relative, uid: namespace.uid, sidecar: {
                    Self.sidecar(at: directory + "/" + $0)
                }) else { continue }
                let child = relative.isEmpty ? component : relative + "/" + component
                var info = stat()
                guard lstat(directory + "/" + entry, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    // Descend only where a match can still be found.
                    if PathBytes.hasPrefix(child, prefix) || PathBytes.hasPrefix(prefix, child + "/") {
                        try walk(child, in: directory + "/" + entry)
                    }
                } else if (info.st_mode & S_IFMT) == S_IFREG, PathBytes.hasPrefix(child, prefix),
                          let name = try? FileName(child) {
                    results.append((name, directory + "/" + entry))
                }
            }
        }
        try walk(start.joined(separator: "/"), in: directory)
        return results.sorted { $0.name < $1.name }
    }

    /// The bytes of the sidecar at `path`: a regular file's (never through
    /// a symlink, never blocking on a FIFO), at most 4 KiB; `nil` for
    /// anything else.
    static func sidecar(at path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 4096 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return count == bytes.count ? bytes : nil
    }

    /// Every namespace with a directory in the store.
    func namespaces() throws -> [Namespace] {
        guard Posix.exists(root) else { return [] }
        let names = self.names
        return try Posix.listDirectory(root).compactMap(names.uid(ofNamespaceEntry:)).sorted().map(Namespace.init(uid:))
    }

    /// Whether any namespace directory under `root` holds a file: a
    /// regular file other than a sidecar (stops at the first). Needs no
    /// key, so it runs before the key bag is open.
    static func holdsAnyFile(root: String) throws -> Bool {
        guard Posix.exists(root) else { return false }
        func holdsFile(_ directory: String) throws -> Bool {
            for entry in try Posix.listDirectory(directory) {
                var info = stat()
                guard lstat(directory + "/" + entry, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFREG, !StoreNames.isSidecar(entry) { return true }
                if (info.st_mode & S_IFMT) == S_IFDIR, try holdsFile(directory + "/" + entry) { return true }
            }
            return false
        }
        for namespace in try Posix.listDirectory(root) {
            let files = root + "/" + namespace + "/files"
            if Posix.exists(files), try holdsFile(files) { return true }
        }
        return false
    }

    /// Removes `name`, whose path (`path(for:in:)`) is `path`; `notFound`
    /// when there is none.
    func delete(_ name: FileName, at path: String, in namespace: Namespace) throws {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw ProtectionError(.notFound, "no file named \(name)")
        }
        try Posix.unlink(path)
        // A crash before this leaves the sidecar alone, which names nothing.
        if PathBytes.lastComponent(of: path).hasPrefix(StoreNames.longEntryPrefix), !Posix.exists(path) {
            try? Posix.unlink(path + StoreNames.sidecarSuffix)
            restoreSidecar(of: name, at: path, in: namespace)
        }
    }

    /// Writes the sidecar of `name`'s long last component again when its
    /// entry at `path` exists without it: a create or whole-file write of
    /// the name (which wrote the sidecar when it began) and a delete of it
    /// can cross, the delete removing the sidecar just before or after the
    /// new entry appears. Both call this after their change, so whichever
    /// runs last puts it back. Best effort: an entry without its sidecar
    /// still reads by name, it only drops out of listings (`check` says so).
    func restoreSidecar(of name: FileName, at path: String, in namespace: Namespace) {
        guard PathBytes.lastComponent(of: path).hasPrefix(StoreNames.longEntryPrefix), Posix.exists(path) else { return }
        let sidecarPath = path + StoreNames.sidecarSuffix
        guard !Posix.exists(sidecarPath), let sidecar = try? entries(of: name, in: namespace).last?.sidecar else { return }
        try? atomicWriter(for: namespace).write(sidecar, to: sidecarPath, durable: true)
    }

    /// Removes what creates and whole-file writes interrupted by a crash
    /// (or `kill -9`) left in each namespace's scratch directory (older
    /// layouts' too): regular
    /// files named like `AtomicFileWriter`'s temporary files, nothing
    /// else, following no symlink; returns how many. Only while no write
    /// is in progress (at start).
    func removeLeftoverTemporaryFiles() throws -> Int {
        guard let rootFD = try Posix.openDirectory(root) else { return 0 }
        defer { close(rootFD) }
        var removed = 0
        for namespace in try Posix.listDirectory(rootFD, path: root) {
            guard let namespaceFD = try Posix.openDirectory(namespace, in: rootFD) else { continue }
            defer { close(namespaceFD) }
            guard let scratchFD = try Posix.openDirectory("tmp", in: namespaceFD) else { continue }
            defer { close(scratchFD) }
            removed += try Posix.removeFiles(in: scratchFD, path: "tmp") {
                SecureRandomName.matches($0, prefix: AtomicFileWriter.temporaryPrefix)
            }
        }
        return removed
    }

    /// Removes every namespace and file (erase).
    func removeEverything() throws {
        defer { forgetNamespaces() }
        try Posix.removeTree(root)
    }
}
