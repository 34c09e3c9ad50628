internal import Sodium

/// The names protd gives namespaces and files on disk (docs/FORMAT.md section 4):
/// each is sealed with `SyntheticIV` under keys derived from the class D
/// key, so it is there in every lock state, hides the uid or path
/// component it stands for, and opens only in the directory and namespace
/// it was made for.
///
/// A namespace directory is named `base64url(seal(uid))`. A path component
/// is padded with zero bytes to a multiple of 16 and sealed bound to its
/// namespace and parent path; its entry is `base64url(sealed)` when that
/// fits in 255 bytes (components up to 160 bytes), else `~` followed by
/// `base64url(MAC(sealed))`, with the sealed bytes in a sidecar file of
/// the same name plus `.n` beside it.
struct StoreNames: Sendable {
    /// Longest component (bytes) whose sealed form is its entry name.
    static let longestShortComponent = 160
    /// First character of a long component's entry.
    static let longEntryPrefix = "~"
    /// Ending of a long entry's sidecar file.
    static let sidecarSuffix = ".n"
    /// Components are zero-padded to a multiple of this many bytes.
    static let padding = 16

    /// What a sealed value stands for, the first byte of its context.
    private enum Kind: UInt8 {
        case namespace = 1, component = 2, longEntry = 3
    }

    /// The directory entry for one component, and for a long one the bytes
    /// of the sidecar that must exist before the entry does.
    struct Entry: Equatable {
        let name: String
        let sidecar: [UInt8]?
    }

    private let macKey: SecretBytes
    private let encryptionKey: SecretBytes

    /// The name keys of a store whose class D key is `classD`. They stay
    /// readable (`SecretBytes.pinnedReadableCopy`): every request seals or
    /// opens names, and changing page protection for each cost close to
    /// half the small-file throughput with 8 clients.
    init(classD: SecretBytes) throws {
        macKey = try .pinnedReadableCopy(
            of: KeyedBlake2b.deriveKey(key: classD, parts: [Array("protd.names.mac.v1".utf8)]))
        encryptionKey = try .pinnedReadableCopy(
            of: KeyedBlake2b.deriveKey(key: classD, parts: [Array("protd.names.encryption.v1".utf8)]))
    }

    // MARK: - Namespaces

    /// The directory name of `uid`'s namespace.
    func namespaceEntry(_ uid: UInt32) throws -> String {
        Base64URL.encode(try SyntheticIV.seal(uid.littleEndianBytes, context: [Kind.namespace.rawValue],
                                              macKey: macKey, encryptionKey: encryptionKey))
    }

    /// The uid whose namespace directory is `entry`, or `nil` when no
    /// namespace of this store has that name.
    func uid(ofNamespaceEntry entry: String) -> UInt32? {
        guard let sealed = Base64URL.decode(entry),
              let bytes = try? SyntheticIV.open(sealed, context: [Kind.namespace.rawValue],
                                                macKey: macKey, encryptionKey: encryptionKey),
              bytes.count == 4
        else { return nil }
        return bytes.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    // MARK: - Path components

    /// The entry of `component` in the directory `parent` (the logical
    /// path of the components before it, empty at the top) of `uid`'s files.
    func entry(for component: some Collection<UInt8>, parent: String, uid: UInt32) throws -> Entry {
        let paddedCount = (component.count + Self.padding - 1) / Self.padding * Self.padding
        var padded: [UInt8] = []
        padded.reserveCapacity(paddedCount)
        padded.append(contentsOf: component)
        padded.append(contentsOf: repeatElement(0, count: paddedCount - component.count))
        let sealed = try SyntheticIV.seal(padded, context: componentContext(parent: parent, uid: uid),
                                          macKey: macKey, encryptionKey: encryptionKey)
        guard component.count > Self.longestShortComponent else { return Entry(name: Base64URL.encode(sealed), sidecar: nil) }
        return Entry(name: try longEntryName(sealed), sidecar: sealed)
    }

    /// The component `entry` in the directory `parent` of `uid`'s files
    /// stands for, or `nil` when it stands for none there: a sidecar, a
    /// name that is not protd's, or one made for another directory or
    /// namespace (moved or copied on disk). `sidecar` reads a long entry's
    /// sidecar file by name (`nil` when missing).
    func component(of entry: String, parent: String, uid: UInt32,
                   sidecar: (String) -> [UInt8]?) -> String? {
        try? resolve(entry, parent: parent, uid: uid, sidecar: sidecar).get()
    }

    /// Why an entry stands for no component where it is (`StoreCheck`).
    enum EntryFault: Error, Equatable {
        /// A long entry without its sidecar file.
        case sidecarMissing
        /// A long entry whose sidecar holds another entry's sealed name.
        case sidecarMismatch
        /// A sealed name that does not open here: made for another
        /// directory or namespace (moved or copied on disk), or altered.
        case sealedElsewhere
        /// Not a name protd makes.
        case foreign
    }

    /// `component(of:parent:uid:sidecar:)`, saying why when it is none.
    func resolve(_ entry: String, parent: String, uid: UInt32,
                 sidecar: (String) -> [UInt8]?) -> Result<String, EntryFault> {
        let sealed: [UInt8]
        if entry.hasPrefix(Self.longEntryPrefix) {
            guard !entry.hasSuffix(Self.sidecarSuffix) else { return .failure(.foreign) }
            guard let stored = sidecar(entry + Self.sidecarSuffix) else { return .failure(.sidecarMissing) }
            guard (try? longEntryName(stored)) == entry else { return .failure(.sidecarMismatch) }
            sealed = stored
        } else {
            guard let decoded = Base64URL.decode(entry) else { return .failure(.foreign) }
            sealed = decoded
        }
        // A sealed component is the IV and one or more padded blocks.
        let body = sealed.count - SyntheticIV.ivByteCount
        guard body > 0, body % Self.padding == 0 else { return .failure(.foreign) }
        guard var padded = try? SyntheticIV.open(sealed, context: componentContext(parent: parent, uid: uid),
                                                 macKey: macKey, encryptionKey: encryptionKey)
        else { return .failure(.sealedElsewhere) }
        while padded.last == 0 { padded.removeLast() }
        guard !padded.isEmpty, !padded.contains(PathBytes.slash),
              let component = String(validating: padded, as: UTF8.self)
        else { return .failure(.sealedElsewhere) }
        return .success(component)
    }

    /// Whether `entry` is a long entry's sidecar file.
    static func isSidecar(_ entry: String) -> Bool {
        entry.hasPrefix(longEntryPrefix) && entry.hasSuffix(sidecarSuffix)
    }

    private func componentContext(parent: String, uid: UInt32) -> [UInt8] {
        var context: [UInt8] = [Kind.component.rawValue]
        context.reserveCapacity(1 + 4 + parent.utf8.count)
        context.appendLittleEndian(uid)
        context.append(contentsOf: parent.utf8)
        return context
    }

    private func longEntryName(_ sealed: [UInt8]) throws -> String {
        Self.longEntryPrefix + Base64URL.encode(try KeyedBlake2b.mac(key: macKey, parts: [[Kind.longEntry.rawValue], sealed]))
    }
}

private extension UInt32 {
    var littleEndianBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(self)
        return bytes
    }
}
