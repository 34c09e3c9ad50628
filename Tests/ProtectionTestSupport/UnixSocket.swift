public import Glibc

/// A Unix socket of `type`, connected or bound to `path` by `operation`
/// (`connect` or `bind`); nil on failure.
public func unixSocket(
    type: Int32, path: String, _ operation: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32
) -> Int32? {
    let fd = socket(AF_UNIX, type, 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { buffer in
        for (index, byte) in path.utf8.enumerated() where index < buffer.count - 1 { buffer[index] = byte }
    }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { operation(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard result == 0 else {
        close(fd)
        return nil
    }
    return fd
}
