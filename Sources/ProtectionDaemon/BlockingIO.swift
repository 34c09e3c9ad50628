internal import NIOPosix

/// Threads for calls that block on the disk (fsync). The cooperative pool
/// has one thread per core, so an fsync there stalls every connection's
/// work and at most two fsyncs were ever in flight; here up to 16 wait at
/// once, and the file system can commit them together (ext4 journals
/// concurrent fsyncs in one commit).
enum BlockingIO {
    /// Most fsyncs in flight at once.
    static let threadCount = 16

    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: threadCount)
        pool.start()
        return pool
    }()

    /// Runs `body` on one of the pool's threads and returns its result.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive(body)
    }
}
