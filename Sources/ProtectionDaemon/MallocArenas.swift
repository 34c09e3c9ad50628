internal import CMallocTuning

/// Keeps the daemon's heap from growing with its thread count: glibc gives
/// threads that allocate at once arenas of their own, and each keeps the
/// large buffers freed into it. With one arena, three 1 GiB writes left the
/// daemon 1-9 MiB above idle instead of 13-19 (docs/DESIGN.md, "Memory").
public enum MallocArenas {
    /// The most arenas protd lets glibc use.
    public static let limit: Int32 = 1

    /// Applies `limit`; call early in `main`, before any other thread
    /// starts. False if glibc refused (the daemon runs on, with more memory).
    public static func applyLimit() -> Bool {
        protd_limit_malloc_arenas(limit) == 0
    }
}
