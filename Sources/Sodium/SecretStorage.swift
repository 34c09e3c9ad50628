/// Where one secret's bytes live: a slot in a shared slab for small secrets,
/// or a guarded allocation of its own for large ones (and for secrets that
/// ask for one, see `Placement`).
struct SecretStorage {
    /// How a secret wants its memory.
    enum Placement {
        /// A slab slot from `allocator` when the secret fits a slot, else an
        /// allocation of its own.
        case automatic(GuardedSlabAllocator)
        /// Always an allocation of its own: for secrets that are filled or
        /// read for a long time (Argon2id), so they do not hold a whole slab
        /// open meanwhile.
        case ownAllocation
        /// A scratch of `GuardedScratchPool.transientSecrets` when the secret
        /// fits one, else an allocation of its own: for the secrets of a
        /// `TransientSecrets` scope. The scratch is read-write for good, so
        /// making, reading and wiping the secret change no page protection.
        case transientScratch
    }

    /// The region whose protection governs these bytes.
    let region: GuardedRegion
    /// The secret's first byte.
    let pointer: UnsafeMutableRawPointer
    /// The bytes this secret owns and zeroes on wipe: its whole slot,
    /// scratch or allocation.
    let capacity: Int
    /// The slot to give back, for slab storage.
    private let slot: (allocator: GuardedSlabAllocator, slot: GuardedSlabAllocator.Slot)?
    /// The pool to give the region back to, for scratch storage.
    private let scratchPool: GuardedScratchPool?

    /// Finds room for `count` bytes. The memory is zero, and `PROT_NONE`
    /// unless it is a scratch.
    init(count: Int, placement: Placement) throws(SodiumError) {
        let scratches = GuardedScratchPool.transientSecrets
        if case .automatic(let allocator) = placement, count <= GuardedSlabAllocator.slotSize {
            let slot = try allocator.allocate()
            region = slot.slab.region
            pointer = slot.pointer
            capacity = GuardedSlabAllocator.slotSize
            self.slot = (allocator, slot)
            scratchPool = nil
        } else if case .transientScratch = placement, count <= scratches.byteCount {
            region = try scratches.take()
            pointer = region.base
            capacity = scratches.byteCount
            slot = nil
            scratchPool = scratches
        } else {
            region = try GuardedRegion(byteCount: count)
            pointer = region.base
            capacity = count
            slot = nil
            scratchPool = nil
        }
    }

    /// Whether the bytes live in a shared slab.
    var isInSlab: Bool { slot != nil }

    /// Whether the bytes live in a read-write scratch (`transientScratch`).
    var isScratch: Bool { scratchPool != nil }

    /// Gives the memory back: the slot to its allocator, the scratch to its
    /// pool, or the own allocation to `sodium_free` when the last reference
    /// to its region goes. The caller must have zeroed `capacity` bytes first.
    func release() {
        if let slot { slot.allocator.release(slot.slot) }
        scratchPool?.giveBack(region)
    }
}
