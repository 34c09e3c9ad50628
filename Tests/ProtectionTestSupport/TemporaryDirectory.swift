internal import Foundation

/// A fresh directory under the system temp dir, removed on `remove()`.
public struct TemporaryDirectory: Sendable {
    /// Absolute path of the directory.
    public let path: String

    /// Creates `/tmp/protd-LABEL-UUID`, or the same inside `parent`.
    public init(_ label: String = "test", in parent: String? = nil) throws {
        let base = parent ?? FileManager.default.temporaryDirectory.path
        path = base + "/protd-\(label)-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Deletes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Path of `name` inside the directory.
    public func appending(_ name: String) -> String { path + "/" + name }
}
