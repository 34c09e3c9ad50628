internal import Synchronization

/// Shared slabs of guarded memory for small secrets (at most `slotSize`
/// bytes: file keys, class keys, X25519 secret keys).
///
/// One `sodium_malloc` per secret costs four pages of address space, two of
/// them resident, and five syscalls to create and free it: about 8 KiB of RSS
/// and a TLB shootdown per open file for a 32-byte key. A slab is one
/// `GuardedRegion` cut into fixed `slotSize` slots, so a key costs 64 bytes
/// and, while its slab is in use anyway, no syscall at all.
///
/// Sizes: a slot is 64 bytes, the largest small secret and one cache line. A
/// slab holds 1023 slots, 65,472 bytes: with libsodium's 16-byte canary in
/// front that fills exactly 16 pages, so slots start 64-byte aligned and the
/// slab costs 17 resident pages (16 mlocked data pages plus libsodium's size
/// page) for 1023 keys. Larger slabs would shave the per-slab page further
/// but put more keys behind each read-only window and use more `mlock`
/// budget for a single warm slab.
///
/// Free policy: a freed slot must already be zero (`SecretBytes` wipes before
/// it releases). A slab that becomes entirely free is freed with
/// `sodium_free`, unless no other slab is entirely free: one empty slab is
/// kept warm, so a count of keys that hovers around a slab boundary does not
/// allocate and free a slab on every open and close. Allocation prefers
/// partly used slabs, so the warm slab stays empty while others have room.
final class GuardedSlabAllocator: Sendable {
    /// Bytes in one slot; secrets up to this size live in a slab.
    static let slotSize = 64
    /// Slots in a slab unless a test asks for fewer.
    static let defaultSlotsPerSlab = 1023
    /// The allocator every `SecretBytes` uses.
    static let shared = GuardedSlabAllocator()

    /// One slot handed out by `allocate`; give it back with `release`.
    struct Slot: @unchecked Sendable {
        /// The slab the slot lives in; read and write it through its region.
        let slab: GuardedSlab
        /// The slot's number inside the slab.
        let index: Int
        /// The slot's first byte.
        var pointer: UnsafeMutableRawPointer {
            slab.region.base + index * GuardedSlabAllocator.slotSize
        }
    }

    /// Slots per slab for this allocator.
    let slotsPerSlab: Int
    private let slabs = Mutex<[GuardedSlab]>([])

    /// An allocator with `slotsPerSlab` slots per slab (tests use small slabs).
    init(slotsPerSlab: Int = GuardedSlabAllocator.defaultSlotsPerSlab) {
        precondition((1...Int(UInt16.max)).contains(slotsPerSlab), "slots per slab out of range")
        self.slotsPerSlab = slotsPerSlab
    }

    /// Takes a free, zeroed slot, creating a slab when every slab is full.
    func allocate() throws(SodiumError) -> Slot {
        try slabs.withLock { (slabs) throws(SodiumError) -> Slot in
            let slab: GuardedSlab
            if let partlyUsed = slabs.first(where: { !$0.isFull && !$0.isEmpty }) {
                slab = partlyUsed
            } else if let empty = slabs.first(where: { $0.isEmpty }) {
                slab = empty
            } else {
                slab = try GuardedSlab(slotCount: slotsPerSlab)
                slabs.append(slab)
            }
            return Slot(slab: slab, index: slab.takeSlot())
        }
    }

    /// Returns a slot the caller has already zeroed. Frees its slab if that
    /// leaves it empty while another empty slab is kept warm.
    func release(_ slot: Slot) {
        let emptied: GuardedSlab? = slabs.withLock { slabs in
            slot.slab.returnSlot(slot.index)
            guard slot.slab.isEmpty,
                  slabs.contains(where: { $0 !== slot.slab && $0.isEmpty }),
                  let position = slabs.firstIndex(where: { $0 === slot.slab })
            else { return nil }
            return slabs.remove(at: position)
        }
        // The slab's memory is released (`sodium_free`) outside the lock,
        // when the last reference to it goes.
        _ = emptied
    }

    /// How many slabs and slots are in use now.
    var statistics: GuardedSlabStatistics {
        slabs.withLock { slabs in
            GuardedSlabStatistics(
                slabCount: slabs.count,
                emptySlabCount: slabs.count(where: \.isEmpty),
                slotsInUse: slabs.reduce(0) { $0 + $1.slotsInUse },
                slotsPerSlab: slotsPerSlab)
        }
    }
}

/// A snapshot of the shared slabs, for tests and benchmarks.
package struct GuardedSlabStatistics: Sendable, Equatable, CustomStringConvertible {
    /// Slabs allocated (each one `sodium_malloc` region).
    package let slabCount: Int
    /// Slabs with no secret in them (at most one is kept warm).
    package let emptySlabCount: Int
    /// Secrets living in slabs.
    package let slotsInUse: Int
    /// Slots in each slab.
    package let slotsPerSlab: Int

    package var description: String {
        "\(slotsInUse) secrets in \(slabCount) slabs of \(slotsPerSlab) slots (\(emptySlabCount) empty)"
    }
}

/// One slab: a guarded region of `slotCount` slots and the list of free ones.
/// The free list is touched only under the owning allocator's lock.
final class GuardedSlab: @unchecked Sendable {
    /// The slab's memory; its protection follows the readers and writers of
    /// every secret in it.
    let region: GuardedRegion
    let slotCount: Int
    /// Free slot numbers, the next one to hand out last (so a freed slot is
    /// the first reused, and a fresh slab fills from slot 0 upwards).
    private var freeSlots: [UInt16]

    fileprivate init(slotCount: Int) throws(SodiumError) {
        region = try GuardedRegion(byteCount: slotCount * GuardedSlabAllocator.slotSize)
        self.slotCount = slotCount
        freeSlots = (0..<slotCount).reversed().map { UInt16($0) }
    }

    fileprivate var isFull: Bool { freeSlots.isEmpty }
    fileprivate var isEmpty: Bool { freeSlots.count == slotCount }
    fileprivate var slotsInUse: Int { slotCount - freeSlots.count }

    fileprivate func takeSlot() -> Int {
        Int(freeSlots.removeLast())
    }

    fileprivate func returnSlot(_ index: Int) {
        freeSlots.append(UInt16(index))
    }
}
