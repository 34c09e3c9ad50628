internal import CSodium
internal import Synchronization

/// Whether guarded memory is really held in RAM. `sodium_malloc` asks for
/// `mlock` but carries on silently when the kernel refuses it (no
/// CAP_IPC_LOCK and a low RLIMIT_MEMLOCK): keys could then be swapped to
/// disk. Every guarded region checks its lock here; the daemon reports the
/// result and, with `requireLocked`, refuses to hold keys in memory that
/// cannot be locked.
public enum MemoryLocking {
    private struct State {
        var requireLocked = false
        var unlockedRegions = 0
        var probeRefused = false
    }

    private static let state = Mutex(State())

    /// When set, a guarded allocation that cannot be locked fails with
    /// `memoryNotLocked` instead of going on unlocked. Set it at start,
    /// before any key is made.
    public static var requireLocked: Bool {
        get { state.withLock { $0.requireLocked } }
        set { state.withLock { $0.requireLocked = newValue } }
    }

    /// Whether key memory is held in RAM: the last `probe()` could lock a
    /// page and every guarded region that exists now is locked.
    public static var isKeyMemoryLocked: Bool {
        state.withLock { !$0.probeRefused && $0.unlockedRegions == 0 }
    }

    /// Whether one page of guarded memory can be locked right now; the
    /// answer is remembered for `isKeyMemoryLocked`.
    public static func probe() -> Bool {
        let locked: Bool
        if (try? SodiumRuntime.ensureInitialised()) != nil, let page = sodium_malloc(64) {
            locked = sodium_mlock(page, 64) == 0
            sodium_free(page)
        } else {
            locked = false
        }
        state.withLock { $0.probeRefused = !locked }
        return locked
    }

    /// Checks that the region at `base` is locked (locking it again is
    /// harmless). Returns false when it is not, and counts it until
    /// `unlockedRegionFreed()`; with `requireLocked`, throws instead (the
    /// caller frees the region).
    static func check(_ base: UnsafeMutableRawPointer, byteCount: Int) throws(SodiumError) -> Bool {
        let locked = sodium_mlock(base, byteCount) == 0
        guard !locked else { return true }
        let required = state.withLock { state in
            if !state.requireLocked { state.unlockedRegions += 1 }
            return state.requireLocked
        }
        if required {
            throw SodiumError(.memoryNotLocked, "key memory cannot be locked in RAM; give protd CAP_IPC_LOCK "
                              + "or a higher LimitMEMLOCK, or turn memory.require-locked off")
        }
        return false
    }

    /// A region `check` found unlocked was freed.
    static func unlockedRegionFreed() {
        state.withLock { $0.unlockedRegions -= 1 }
    }
}
