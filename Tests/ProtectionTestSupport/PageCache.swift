internal import Glibc

/// A file's pages in the page cache, for benchmarks and tests that need a
/// file in a known cache state.
public enum PageCache {
    /// Drops the file's cached pages that no process maps (dirty ones stay
    /// until written back).
    public static func drop(_ path: String) throws {
        try withFile(path) { fd in
            // posix_fadvise returns its error rather than setting errno.
            let code = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
            guard code == 0 else { throw SystemCallFailure("posix_fadvise", path, errno: code) }
        }
    }

    /// Reads the whole file once, front to back, as cp does.
    public static func readThrough(_ path: String) throws {
        try withFile(path) { fd in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { throw SystemCallFailure("read", path) }
                if count == 0 { return }
            }
        }
    }

    /// Runs `body` with `path` open for reading.
    private static func withFile(_ path: String, _ body: (Int32) throws -> Void) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemCallFailure("open", path) }
        defer { close(fd) }
        try body(fd)
    }
}
