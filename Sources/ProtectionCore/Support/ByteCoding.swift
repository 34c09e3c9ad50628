/// Little-endian integer encoding for the on-disk formats.
extension Array where Element == UInt8 {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

/// Reads fields in order from a byte buffer, failing cleanly past the end.
struct ByteReader {
    private let bytes: ArraySlice<UInt8>
    private(set) var offset: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes[...]
        self.offset = 0
    }

    var remaining: Int { bytes.count - offset }

    mutating func read(_ count: Int) -> [UInt8]? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return Array(bytes[(bytes.startIndex + offset)..<(bytes.startIndex + offset + count)])
    }

    mutating func readLittleEndian<T: FixedWidthInteger>(_: T.Type = T.self) -> T? {
        guard let raw = read(MemoryLayout<T>.size) else { return nil }
        return raw.reversed().reduce(T.zero) { ($0 << 8) | T($1) }
    }
}
