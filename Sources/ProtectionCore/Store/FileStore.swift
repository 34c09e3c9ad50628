internal import Glibc

/// Where protected files live on disk: `ROOT/<uid>/files/<name>`, with
/// `ROOT/<uid>/tmp/` for atomic writes on the same file system. Knows
/// paths, names and metadata; knows nothing of keys.
struct FileStore: Sendable {
    /// The store root (`<state>/store`).
    let root: String
    /// Namespaces whose directories exist already (checking them on every
    /// operation cost two mkdir calls per path component), as of
    /// `generation`, which every `forgetNamespaces` bumps.
    private let preparedNamespaces = LockedState<(uids: Set<UInt32>, generation: UInt64)>(([], 0))

    init(root: String) {
        self.root = root
    }

    func filesDirectory(_ namespace: Namespace) -> String { "\(root)/\(namespace.uid)/files" }
    func scratchDirectory(_ namespace: Namespace) -> String { "\(root)/\(namespace.uid)/tmp" }

    /// The path of `name`, after making sure its namespace exists.
    func path(for name: FileName, in namespace: Namespace) throws -> String {
        let generation = preparedNamespaces.withLock { $0.uids.contains(namespace.uid) ? nil : $0.generation }
        if let generation {
            try Posix.makeDirectories(scratchDirectory(namespace))
            try Posix.makeDirectories(filesDirectory(namespace))
            preparedNamespaces.withLock { prepared in
                // An erase that removed everything meanwhile may have taken
                // these directories too: then they are made again next time.
                if prepared.generation == generation { prepared.uids.insert(namespace.uid) }
            }
        }
        return filesDirectory(namespace) + "/" + name.value
    }

    /// Forgets which namespaces exist (after everything was removed).
    func forgetNamespaces() {
        preparedNamespaces.withLock { prepared in
            prepared.uids.removeAll()
            prepared.generation += 1
        }
    }

    /// Like `path(for:in:)`, also creating the name's parent directories.
    func pathCreatingParents(for name: FileName, in namespace: Namespace) throws -> String {
        let path = try path(for: name, in: namespace)
        if name.value.utf8.contains(PathBytes.slash) { try Posix.makeDirectories(Posix.parentDirectory(of: path)) }
        return path
    }

    /// An atomic writer whose temporary files are in `namespace`'s scratch directory.
    func atomicWriter(for namespace: Namespace) -> AtomicFileWriter {
        AtomicFileWriter(scratchDirectory: scratchDirectory(namespace))
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
        let path = try path(for: name, in: namespace)
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
        try names(in: namespace, prefix: prefix).compactMap { name in
            try? attributes(of: name, in: namespace, openFile: openFile)
        }
    }

    /// The names of the regular files in `namespace` starting with
    /// `prefix`, sorted; entries whose path is no valid name are skipped.
    func names(in namespace: Namespace, prefix: String) throws -> [FileName] {
        let base = filesDirectory(namespace)
        guard Posix.exists(base) else { return [] }
        var results: [FileName] = []
        func walk(_ relative: String) throws {
            let directory = relative.isEmpty ? base : base + "/" + relative
            for entry in try Posix.listDirectory(directory) {
                let child = relative.isEmpty ? entry : relative + "/" + entry
                var info = stat()
                guard lstat(base + "/" + child, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    // Descend only where a match can still be found.
                    if PathBytes.hasPrefix(child, prefix) || PathBytes.hasPrefix(prefix, child + "/") { try walk(child) }
                } else if (info.st_mode & S_IFMT) == S_IFREG, PathBytes.hasPrefix(child, prefix),
                          let name = try? FileName(child) {
                    results.append(name)
                }
            }
        }
        try walk("")
        return results.sorted()
    }

    /// Every namespace with a directory in the store.
    func namespaces() throws -> [Namespace] {
        guard Posix.exists(root) else { return [] }
        return try Posix.listDirectory(root).compactMap(UInt32.init).sorted().map(Namespace.init(uid:))
    }

    /// Whether any namespace holds a regular file (stops at the first).
    func holdsAnyFile() throws -> Bool {
        guard Posix.exists(root) else { return false }
        func holdsFile(_ directory: String) throws -> Bool {
            for entry in try Posix.listDirectory(directory) {
                var info = stat()
                guard lstat(directory + "/" + entry, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFREG { return true }
                if (info.st_mode & S_IFMT) == S_IFDIR, try holdsFile(directory + "/" + entry) { return true }
            }
            return false
        }
        for namespace in try namespaces() {
            let files = filesDirectory(namespace)
            if Posix.exists(files), try holdsFile(files) { return true }
        }
        return false
    }

    /// Removes `name`; `notFound` when there is none.
    func delete(_ name: FileName, in namespace: Namespace) throws {
        let path = try path(for: name, in: namespace)
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw ProtectionError(.notFound, "no file named \(name)")
        }
        try Posix.unlink(path)
    }

    /// Removes what creates and whole-file writes interrupted by a crash
    /// (or `kill -9`) left in each namespace's scratch directory: regular
    /// files named like `AtomicFileWriter`'s temporary files, nothing
    /// else, following no symlink; returns how many. Only while no write
    /// is in progress (at start).
    func removeLeftoverTemporaryFiles() throws -> Int {
        guard let rootFD = try Posix.openDirectory(root) else { return 0 }
        defer { close(rootFD) }
        var removed = 0
        for uid in try Posix.listDirectory(rootFD, path: root) where UInt32(uid) != nil {
            guard let namespaceFD = try Posix.openDirectory(uid, in: rootFD) else { continue }
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
