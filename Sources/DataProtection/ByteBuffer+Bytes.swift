internal import NIOCore

extension ByteBuffer {
    /// The readable bytes as a new array, in one copy.
    var readableByteArray: [UInt8] {
        var array: [UInt8] = []
        appendReadableBytes(to: &array)
        return array
    }

    /// Appends the readable bytes to `array` in one copy.
    func appendReadableBytes(to array: inout [UInt8]) {
        withUnsafeReadableBytes { array.append(contentsOf: $0) }
    }
}
