internal import CSodium
internal import Glibc
internal import Synchronization

/// Guarded scratch memory for key material that lives only during one
/// call: BLAKE2b states (a keyed `crypto_generichash_init` copies the key
/// into the state), AES-256-GCM subkeys with their expanded round keys, and
/// the keys a `TransientSecrets` scope makes (a small file's read).
/// Each scratch is a `sodium_malloc` allocation (guard pages, `mlock`,
/// excluded from core dumps), zeroed as soon as the call is done. A few
/// zeroed scratches are kept for the next calls, left read-write since
/// they hold nothing between uses: a call then costs no system call (a
/// fresh guarded allocation costs about ten, and every file open or create
/// hashes twice).
final class GuardedScratchPool: Sendable {
    /// For `crypto_generichash` states (64-byte aligned).
    static let blake2bStates = GuardedScratchPool(byteCount: crypto_generichash_statebytes(), alignment: 64)

    /// For the secrets of a `TransientSecrets` scope: one slab slot's worth.
    static let transientSecrets = GuardedScratchPool(byteCount: GuardedSlabAllocator.slotSize, alignment: 64)

    /// Zeroed scratches kept at most; beyond that they are freed. Every
    /// core may seal a segment at once, each holding an AES scratch and,
    /// while deriving its subkey, a BLAKE2b one.
    static let keptScratches = max(8, 2 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

    /// Usable bytes, rounded up to the alignment: `sodium_malloc` puts an
    /// allocation right before a guard page, so its start is aligned only
    /// as far as its size is.
    let byteCount: Int
    let alignment: Int
    private let free = Mutex<[GuardedRegion]>([])

    /// A pool of scratches of at least `byteCount` bytes, aligned to
    /// `alignment` (a power of two).
    init(byteCount: Int, alignment: Int) {
        self.byteCount = (byteCount + alignment - 1) & ~(alignment - 1)
        self.alignment = alignment
    }

    /// Lends a zeroed scratch for `body`, zeroing it again after.
    func withScratch<R>(_ body: (UnsafeMutableRawPointer) throws -> R) throws -> R {
        let region = try take()
        defer { giveBack(region) }
        return try body(region.base)
    }

    /// A zeroed, read-write scratch until `giveBack`.
    func take() throws(SodiumError) -> GuardedRegion {
        if let kept = free.withLock({ $0.popLast() }) { return kept }
        return try makeScratch()
    }

    /// Zeroes `region`, taken from this pool, and keeps it for the next call
    /// (or frees it when enough are kept).
    func giveBack(_ region: GuardedRegion) {
        sodium_memzero(region.base, region.byteCount)
        free.withLock { scratches in
            if scratches.count < Self.keptScratches { scratches.append(region) }
        }
    }

    private func makeScratch() throws(SodiumError) -> GuardedRegion {
        let region = try GuardedRegion(byteCount: byteCount)
        precondition(Int(bitPattern: region.base) % alignment == 0, "guarded scratch is not aligned")
        // Read-write for good: it holds zeros whenever it is not in use.
        region.beginWrite()
        return region
    }

    /// Runs `body` on the scratches kept for reuse, with nobody able to
    /// take one meanwhile (a test hook).
    func withKeptScratchesForTesting<R: Sendable>(_ body: ([GuardedRegion]) -> R) -> R {
        free.withLock { body($0) }
    }
}
