public import ProtectionModel
internal import ProtectionWire

/// A file's name, class, size and modification time, as `list` and
/// `ProtectedFile.attributes` report them.
public struct FileAttributes: Sendable, Equatable, Hashable {
    /// The name within the caller's namespace.
    public var name: String
    /// The protection class.
    public var protection: ProtectionClass
    /// The content size in bytes.
    public var size: UInt64
    /// The last modification, in whole seconds since the Unix epoch.
    public var modificationTimeUnixSeconds: Int64

    /// Makes attributes.
    public init(name: String, protection: ProtectionClass, size: UInt64, modificationTimeUnixSeconds: Int64) {
        self.name = name
        self.protection = protection
        self.size = size
        self.modificationTimeUnixSeconds = modificationTimeUnixSeconds
    }
}

extension FileAttributes {
    init(_ wire: WireAttributes) {
        self.init(name: wire.name, protection: wire.protection, size: wire.size,
                  modificationTimeUnixSeconds: wire.modificationTime)
    }
}
