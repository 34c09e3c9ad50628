/// Where a file belongs: its owner's namespace and its name. A version 2
/// header binds both into its key slot and tag (docs/FORMAT.md 1.2, 1.3),
/// so a file copied, moved or linked to another name or namespace on disk
/// fails integrity.
struct FileBinding: Equatable, Sendable {
    let uid: UInt32
    let name: String

    init(_ name: FileName, in namespace: Namespace) {
        uid = namespace.uid
        self.name = name.value
    }

    /// uid (u32 LE) || name length in bytes (u16 LE) || name (UTF-8).
    var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(uid)
        bytes.appendLittleEndian(UInt16(name.utf8.count))
        return bytes + Array(name.utf8)
    }
}
