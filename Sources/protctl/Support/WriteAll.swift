import Glibc

/// Writes all of `buffer` to `fd`, retrying partial writes and `EINTR`.
/// Returns false, with `errno` set, when a write fails (a closed pipe, a
/// full disk).
func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
    var offset = 0
    while offset < buffer.count {
        let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return false }
        offset += written
    }
    return true
}
