internal import Glibc

/// A validated file name: a relative path inside the caller's namespace.
///
/// Rules: UTF-8 without NUL, 1 to 1024 bytes, components separated by `/`,
/// each 1 to 255 bytes and neither `.` nor `..`; no leading `/` (absolute),
/// no empty component (`a//b`, trailing `/`). Every rule is checked on the
/// bytes the kernel will see (`PathBytes`), not on Swift characters: a
/// combining mark after `/` or `..` changes the characters, not the bytes.
public struct FileName: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// Longest name in UTF-8 bytes.
    public static let maxByteCount = 1024
    /// Longest single component in UTF-8 bytes.
    public static let maxComponentByteCount = 255

    /// The name as given.
    public let value: String

    /// Validates `value`; throws `invalidName` saying which rule it breaks.
    public init(_ value: String) throws {
        func refuse(_ why: String) -> ProtectionError {
            ProtectionError(.invalidName, "invalid file name: \(why)")
        }
        let bytes = value.utf8
        guard !bytes.isEmpty else { throw refuse("the name is empty") }
        guard bytes.count <= Self.maxByteCount else { throw refuse("longer than \(Self.maxByteCount) bytes") }
        guard !bytes.contains(0) else { throw refuse("contains a NUL byte") }
        guard bytes.first != PathBytes.slash else { throw refuse("absolute paths are not allowed; use a relative name") }
        for component in PathBytes.components(value) {
            guard !component.isEmpty else { throw refuse("an empty path component, from a double or trailing '/'") }
            guard !PathBytes.isDotOrDotDot(component) else { throw refuse("'.' and '..' components are not allowed") }
            guard component.count <= Self.maxComponentByteCount else {
                throw refuse("a component is longer than \(Self.maxComponentByteCount) bytes")
            }
        }
        self.value = value
    }

    public var description: String { value }
    public static func < (lhs: FileName, rhs: FileName) -> Bool { lhs.value.utf8.lexicographicallyPrecedes(rhs.value.utf8) }

    /// Names are equal when their bytes are: `String`'s own equality is
    /// canonical equivalence, which would make two files one.
    public static func == (lhs: FileName, rhs: FileName) -> Bool { lhs.value.utf8.elementsEqual(rhs.value.utf8) }

    public func hash(into hasher: inout Hasher) {
        for byte in value.utf8 { hasher.combine(byte) }
    }
}

/// A peer's private set of files, keyed by its uid.
public struct Namespace: Hashable, Sendable, CustomStringConvertible {
    /// The owning uid.
    public let uid: UInt32

    /// The namespace of `uid`.
    public init(uid: UInt32) { self.uid = uid }

    public var description: String { "uid \(uid)" }
}

/// What `stat` and `list` report; available in every lock state.
public struct FileAttributes: Sendable, Equatable {
    /// The file's name.
    public let name: FileName
    /// Its protection class.
    public let protection: ProtectionClass
    /// Plaintext size in bytes.
    public let size: Int
    /// Last modification, seconds since the Unix epoch.
    public let modificationTime: Int64
}

extension FileName {
    /// Runs `body` on this file. A system call's error about the file's
    /// path names the sealed entry, which means nothing to the caller, so
    /// the ones about the name itself are said with this name instead: a
    /// path through a file, a directory, a path too deep, and (for an
    /// operation on an `existing` file, where it can only mean the file)
    /// no such file.
    func speaking<R>(existing: Bool = true, _ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as ProtectionError {
            switch error.systemErrno {
            case ENOENT? where existing: throw ProtectionError(.notFound, "no file named \(self)")
            case ENOTDIR?: throw ProtectionError(.invalidName, "\(self): a path component is a file")
            // A directory is no file to read (notFound), nor a name a new file can take (invalidName).
            case EISDIR?: throw ProtectionError(existing ? .notFound : .invalidName, "\(self) is a directory, not a file")
            case ENAMETOOLONG?:
                throw ProtectionError(.invalidName, "\(self): too many components for the store's sealed paths")
            default: throw error
            }
        }
    }
}
