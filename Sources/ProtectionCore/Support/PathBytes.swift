/// Paths as the kernel reads them: bytes, split at every `/` (0x2F).
/// Swift's `String` compares and splits by grapheme cluster, so `"/\u{301}"`
/// is one character that is not `"/"`, and `"../\u{301}x"` has no `".."`
/// component as characters while the kernel sees one. Every path rule in
/// protd goes through these instead.
enum PathBytes {
    static let slash = UInt8(ascii: "/")
    static let dot = UInt8(ascii: ".")

    /// The byte components of `path`, empty ones kept.
    static func components(_ path: String) -> [ArraySlice<UInt8>] {
        Array(path.utf8).split(separator: slash, omittingEmptySubsequences: false)
    }

    /// Whether `component` is `.` or `..`.
    static func isDotOrDotDot(_ component: ArraySlice<UInt8>) -> Bool {
        component.elementsEqual([dot]) || component.elementsEqual([dot, dot])
    }

    /// Whether `path` starts with the bytes of `prefix`.
    static func hasPrefix(_ path: String, _ prefix: String) -> Bool {
        path.utf8.starts(with: prefix.utf8)
    }

    /// The directory holding `path`: everything before its last `/` byte
    /// (a trailing one ignored); `/` for a top-level absolute path, `.` for
    /// a name without a slash.
    static func parent(of path: String) -> String {
        var bytes = Array(path.utf8)
        if bytes.count > 1, bytes.last == slash { bytes.removeLast() }
        guard let last = bytes.lastIndex(of: slash) else { return "." }
        return last == 0 ? "/" : String(decoding: bytes[..<last], as: UTF8.self)
    }

    /// The last component of `path` (after its last `/` byte).
    static func lastComponent(of path: String) -> String {
        let bytes = Array(path.utf8)
        guard let last = bytes.lastIndex(of: slash) else { return path }
        return String(decoding: bytes[(last + 1)...], as: UTF8.self)
    }
}
