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
    }

    /// The region whose protection governs these bytes.
    let region: GuardedRegion
    /// The secret's first byte.
    let pointer: UnsafeMutableRawPointer
    /// The bytes this secret owns and zeroes on wipe: its whole slot, or its
    /// whole allocation.
    let capacity: Int
    /// The slot to give back, for slab storage.
    private let slot: (allocator: GuardedSlabAllocator, slot: GuardedSlabAllocator.Slot)?

    /// Finds room for `count` bytes. The memory is zero and `PROT_NONE`.
    init(count: Int, placement: Placement) throws(SodiumError) {
        if case .automatic(let allocator) = placement, count <= GuardedSlabAllocator.slotSize {
            let slot = try allocator.allocate()
            self.region = slot.slab.region
            self.pointer = slot.pointer
            self.capacity = GuardedSlabAllocator.slotSize
            self.slot = (allocator, slot)
        } else {
            let region = try GuardedRegion(byteCount: count)
            self.region = region
            self.pointer = region.base
            self.capacity = count
            self.slot = nil
        }
    }

    /// Whether the bytes live in a shared slab.
    var isInSlab: Bool { slot != nil }

    /// Gives the memory back: the slot to its allocator, or the own
    /// allocation to `sodium_free` when the last reference to its region
    /// goes. The caller must have zeroed `capacity` bytes first.
    func release() {
        if let slot { slot.allocator.release(slot.slot) }
    }
}
