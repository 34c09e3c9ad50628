internal import Glibc
internal import Sodium

extension StoreCheckReport {
    fileprivate mutating func add(uid: UInt32? = nil, name: String? = nil, path: String, _ description: String) {
        problemCount += 1
        guard problems.count < StoreCheck.listedProblemLimit else { return }
        problems.append(Problem(uid: uid, name: name, path: path, description: description))
    }
}

/// An fsck for the store (`protctl check`): walks `<state>/store`, changing
/// nothing, and checks every namespace directory name, every entry name
/// (it opens in its directory and namespace), long names' sidecars, and
/// every file's header, length and, where its class key is in memory, key
/// slot and tag. Reports what protd does not make there: legacy layout
/// directories, symlinks, devices, foreign names.
struct StoreCheck {
    /// Problems kept for the report; the rest are only counted.
    static let listedProblemLimit = 1000

    let files: FileStore
    /// The class keys in memory now, taken again for every file (a lock
    /// may come during the walk); nil once they may not be used.
    let keys: () -> ClassKeys?
    /// Runs a file's check serialised with the store's own users of that
    /// inode, so that no handle is halfway through writing it.
    let serialised: (FileIdentity, () -> Void) -> Void

    /// `<state>`, to which report paths are relative.
    private var base: String { Posix.parentDirectory(of: files.root) }

    /// Walks the store.
    func run() -> StoreCheckReport {
        var report = StoreCheckReport()
        guard Posix.exists(files.root) else { return report }
        let names = files.names
        for entry in list("store", uid: nil, &report) {
            let relative = "store/" + entry
            let kind = EntryKind(base + "/" + relative)
            if let uid = names.uid(ofNamespaceEntry: entry) {
                guard kind == .directory else {
                    report.add(uid: uid, path: relative, "a namespace's name on \(kind), not a directory")
                    continue
                }
                report.namespaces += 1
                checkNamespace(relative, uid: uid, names, &report)
            } else if let uid = UInt32(entry), String(uid) == entry, kind == .directory {
                report.add(uid: uid, path: relative, "a directory of the first layout (uid in clear) that protd's "
                           + "move to sealed names left behind")
            } else if kind != .missing {
                report.add(path: relative, "\(kind) that is not a namespace of this store")
            }
        }
        return report
    }

    private func checkNamespace(_ relative: String, uid: UInt32, _ names: StoreNames, _ report: inout StoreCheckReport) {
        for entry in list(relative, uid: uid, &report) {
            let path = relative + "/" + entry
            switch (entry, EntryKind(base + "/" + path)) {
            case ("files", .directory):
                checkDirectory(path, parent: "", uid: uid, names, &report)
            case ("tmp", .directory):
                for temporary in list(path, uid: uid, &report) {
                    let kind = EntryKind(base + "/" + path + "/" + temporary)
                    let writing = kind == .file && SecureRandomName.matches(temporary, prefix: AtomicFileWriter.temporaryPrefix)
                    if kind == .missing || writing { continue }
                    report.add(uid: uid, path: path + "/" + temporary, "\(kind) that is not a write's temporary file")
                }
            case (_, .missing):
                continue
            case (_, let kind):
                report.add(uid: uid, path: path, "\(kind) that protd does not make in a namespace")
            }
        }
    }

    /// Checks the entries of `relative`, the directory of the logical path
    /// `parent` in `uid`'s files.
    private func checkDirectory(_ relative: String, parent: String, uid: UInt32, _ names: StoreNames,
                                _ report: inout StoreCheckReport) {
        for entry in list(relative, uid: uid, &report) {
            let path = relative + "/" + entry
            let kind = EntryKind(base + "/" + path)
            if kind == .missing { continue }  // removed meanwhile
            if StoreNames.isSidecar(entry) {
                checkSidecar(path, kind: kind, uid: uid, &report)
                continue
            }
            let resolved = names.resolve(entry, parent: parent, uid: uid) { sidecarContents(relative + "/" + $0) }
                .map { parent.isEmpty ? $0 : parent + "/" + $0 }
            switch (kind, resolved) {
            case (.directory, .success(let name)):
                checkDirectory(path, parent: name, uid: uid, names, &report)
            case (.file, .success(let name)):
                guard let fileName = try? FileName(name) else {
                    report.add(uid: uid, name: name, path: path, "a name that is not a valid file name")
                    continue
                }
                checkFile(path, name: fileName, uid: uid, &report)
            case (.directory, .failure(let fault)):
                report.add(uid: uid, path: path, Self.describe(fault, entry) + "; its contents were not checked")
            case (.file, .failure(let fault)):
                report.add(uid: uid, path: path, Self.describe(fault, entry))
            default:
                report.add(uid: uid, name: try? resolved.get(), path: path, "\(kind), which protd never makes among files")
            }
        }
    }

    /// A sidecar must be a regular file beside its long entry (whose own
    /// check says whether the sidecar names it).
    private func checkSidecar(_ relative: String, kind: EntryKind, uid: UInt32, _ report: inout StoreCheckReport) {
        guard kind == .file else {
            report.add(uid: uid, path: relative, "\(kind) named like a long name's sidecar")
            return
        }
        let entry = String(relative.dropLast(StoreNames.sidecarSuffix.count))
        // A create writes the sidecar first and a delete removes it last:
        // an orphan that goes away meanwhile was one of those.
        guard EntryKind(base + "/" + entry) == .missing, EntryKind(base + "/" + relative) != .missing else { return }
        report.add(uid: uid, path: relative, "a long name's sidecar without its entry (left by an interrupted "
                   + "create or delete, or its entry was moved)")
    }

    private func checkFile(_ relative: String, name: FileName, uid: UInt32, _ report: inout StoreCheckReport) {
        let path = base + "/" + relative
        let fd: Int32
        do {
            fd = try Posix.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch let error as ProtectionError where error.code == .notFound {
            return  // deleted meanwhile
        } catch {
            report.add(uid: uid, name: name.value, path: relative, "cannot be opened: \(error)")
            return
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return }
        let keys = self.keys()
        var outcome = FileOutcome()
        serialised(FileIdentity(info)) {
            outcome = Self.inspect(fd: fd, path: path, binding: FileBinding(name, in: Namespace(uid: uid)), keys: keys)
        }
        report.files += 1
        switch outcome.keySlot {
        case .verified: report.verifiedFiles += 1
        case .classKeyAbsent: report.unverifiableFiles += 1
        case .notReached: break
        }
        for problem in outcome.problems { report.add(uid: uid, name: name.value, path: relative, problem) }
    }

    /// What one file's check found.
    private struct FileOutcome {
        enum KeySlot { case verified, classKeyAbsent, notReached }
        var problems: [String] = []
        var keySlot = KeySlot.notReached
    }

    /// Header, length, then key slot and tag with the class key if it is
    /// in `keys`. Disk I/O first; the key work alone in its key window.
    private static func inspect(fd: Int32, path: String, binding: FileBinding, keys: ClassKeys?) -> FileOutcome {
        var outcome = FileOutcome()
        let header: FileHeader
        do {
            header = try EncryptedFile.readHeader(fd: fd, path: path, binding: binding)
        } catch {
            outcome.problems.append("header: \(error)")
            return outcome
        }
        var info = stat()
        if fstat(fd, &info) == 0,
           SegmentLayout(segmentSize: header.segmentSize, cipher: header.algorithm)
               .plaintextSize(forFileLength: Int(info.st_size)) == nil {
            outcome.problems.append("its length (\(info.st_size) bytes) is not whole segments: truncated or extended")
        }
        guard let keys else { return outcome }
        if header.version == 1 && !keys.unboundFilesAllowed {
            outcome.problems.append("a version 1 header, bound to no name or owner, where every file was bound already")
            return outcome
        }
        guard (try? keys.unwrapping(header.protection)) != nil else {
            outcome.keySlot = .classKeyAbsent
            return outcome
        }
        do {
            try keys.withClassKeyReadable(for: header.protection) { try FileKey.unwrap(header, keys: keys).wipe() }
            outcome.keySlot = .verified
        } catch let error as ProtectionError where error.code == .cipherUnavailable {
            outcome.keySlot = .verified  // authentic; only its content cipher does not run here
        } catch let error as SodiumError where error.code == .secretWiped {
            outcome.keySlot = .classKeyAbsent  // a lock took the key meanwhile
        } catch {
            outcome.problems.append("key slot or header tag: \(error)")
        }
        return outcome
    }

    /// The sorted entries of `relative`; none, and a problem, when it
    /// cannot be listed.
    private func list(_ relative: String, uid: UInt32?, _ report: inout StoreCheckReport) -> [String] {
        do {
            return try Posix.listDirectory(base + "/" + relative).sorted()
        } catch {
            report.add(uid: uid, path: relative, "cannot be listed: \(error)")
            return []
        }
    }

    /// A long entry's sidecar bytes (`FileStore.sidecar(at:)`).
    private func sidecarContents(_ relative: String) -> [UInt8]? {
        FileStore.sidecar(at: base + "/" + relative)
    }

    private static func describe(_ fault: StoreNames.EntryFault, _ entry: String) -> String {
        switch fault {
        case .sidecarMissing: "a long name whose sidecar \(entry)\(StoreNames.sidecarSuffix) is missing"
        case .sidecarMismatch: "a long name whose sidecar holds another entry's name"
        case .sealedElsewhere: "a sealed name that does not open here: moved or copied from another directory "
                               + "or namespace, or altered"
        case .foreign: "a name protd does not make"
        }
    }
}

/// What a directory entry is, by `lstat` (links are not followed).
private enum EntryKind: Equatable, CustomStringConvertible {
    case directory, file, symlink, device, fifo, socket
    /// A name that is not UTF-8: listed altered, so `lstat` cannot reach it.
    case undecodableName
    /// Gone (removed during the walk).
    case missing

    init(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            self = PathBytes.lastComponent(of: path).contains("\u{FFFD}") ? .undecodableName : .missing
            return
        }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: self = .directory
        case S_IFREG: self = .file
        case S_IFLNK: self = .symlink
        case S_IFIFO: self = .fifo
        case S_IFSOCK: self = .socket
        default: self = .device
        }
    }

    var description: String {
        switch self {
        case .directory: "a directory"
        case .file: "a file"
        case .symlink: "a symlink"
        case .device: "a device"
        case .fifo: "a FIFO"
        case .socket: "a socket"
        case .undecodableName: "an entry whose name is not UTF-8"
        case .missing: "an entry removed meanwhile"
        }
    }
}
