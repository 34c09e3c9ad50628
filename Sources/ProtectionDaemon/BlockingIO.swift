internal import NIOPosix

/// Threads for calls that block on the disk (fsync) or may run long (a
/// truncate that grows a file by gigabytes, the listing of a large
/// namespace). The cooperative pool has one thread per core, so such a
/// call there stalls every other connection's requests; here up to 16 run
/// at once while the cooperative threads serve the rest, and the file
/// system can commit concurrent fsyncs together (ext4 journals them in
/// one commit).
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
