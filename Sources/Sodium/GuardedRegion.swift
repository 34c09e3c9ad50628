internal import CSodium
internal import Glibc
internal import Synchronization

/// One `sodium_malloc` allocation (guard pages, canary, `mlock`,
/// `MADV_DONTDUMP`) whose page protection follows who is using it.
///
/// The region is `PROT_NONE` while idle, read-only while at least one reader
/// is inside, and read-write while at least one writer is inside (a writer
/// wins over readers; readers that are inside keep reading). Counting means
/// nested and overlapping users share one `mprotect` pair: only the first
/// user in and the last user out change the protection.
///
/// A region holds either one large secret or a whole slab of small ones
/// (`GuardedSlabAllocator`). It does not know what is inside; callers zero
/// what they own before they let go of it.
final class GuardedRegion: @unchecked Sendable {
    /// The page protection the region currently has.
    enum Protection: Sendable, Equatable {
        case noAccess, readOnly, readWrite
    }

    /// Who is inside, guarded by `access`.
    private struct Access {
        var readers = 0
        var writers = 0
        var protection = Protection.noAccess
        /// How many `sodium_mprotect_*` calls `apply` made (a test hook).
        var protectionChanges = 0
    }

    /// The first usable byte; never changes.
    let base: UnsafeMutableRawPointer
    /// The usable bytes from `base`.
    let byteCount: Int
    /// Whether the kernel refused to lock it (`MemoryLocking`).
    private let unlocked: Bool
    private let access = Mutex(Access())

    /// Allocates `byteCount` zeroed bytes of guarded memory, left `PROT_NONE`.
    init(byteCount: Int) throws(SodiumError) {
        try SodiumRuntime.ensureInitialised()
        guard let memory = sodium_malloc(byteCount) else {
            throw SodiumError(.allocationFailed, "could not allocate \(byteCount) bytes of guarded memory")
        }
        sodium_memzero(memory, byteCount)
        do {
            unlocked = try !MemoryLocking.check(memory, byteCount: byteCount)
        } catch {
            sodium_free(memory)
            throw error
        }
        sodium_mprotect_noaccess(memory)
        self.base = memory
        self.byteCount = byteCount
    }

    /// Makes the region readable (unless it already is) until `endRead`.
    func beginRead() {
        access.withLock { state in
            state.readers += 1
            apply(&state)
        }
    }

    /// Ends one `beginRead`; the last user out makes the region `PROT_NONE`.
    func endRead() {
        access.withLock { state in
            precondition(state.readers > 0, "endRead without beginRead")
            state.readers -= 1
            apply(&state)
        }
    }

    /// Makes the region writable until `endWrite`.
    func beginWrite() {
        access.withLock { state in
            state.writers += 1
            apply(&state)
        }
    }

    /// Ends one `beginWrite`: back to read-only if readers are inside,
    /// else `PROT_NONE`.
    func endWrite() {
        access.withLock { state in
            precondition(state.writers > 0, "endWrite without beginWrite")
            state.writers -= 1
            apply(&state)
        }
    }

    /// The protection right now (a test hook).
    var protection: Protection { access.withLock { $0.protection } }

    /// How many protection changes this region has made (a test hook).
    var protectionChanges: Int { access.withLock { $0.protectionChanges } }

    /// Brings the page protection in line with the counts; called with the
    /// lock held so no two threads ever race on `mprotect`.
    private func apply(_ state: inout Access) {
        let wanted: Protection =
            state.writers > 0 ? .readWrite : state.readers > 0 ? .readOnly : .noAccess
        guard wanted != state.protection else { return }
        switch wanted {
        case .noAccess: sodium_mprotect_noaccess(base)
        case .readOnly: sodium_mprotect_readonly(base)
        case .readWrite: sodium_mprotect_readwrite(base)
        }
        state.protection = wanted
        state.protectionChanges += 1
    }

    deinit {
        // sodium_free checks the canary, which sits inside the protected page.
        sodium_mprotect_readwrite(base)
        sodium_free(base)
        if unlocked { MemoryLocking.unlockedRegionFreed() }
    }
}
