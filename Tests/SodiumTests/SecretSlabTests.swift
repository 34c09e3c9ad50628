@testable import Sodium
import Glibc
import Synchronization
import Testing

/// Each test owns its allocator, so tests running in parallel cannot change
/// the slab counts another test checks.
@Suite("Small secrets in shared slabs of guarded memory")
struct SecretSlabTests {
    @Test("five thousand small secrets fit in five slabs")
    func manySecretsFewSlabs() throws {
        let allocator = GuardedSlabAllocator()
        let secrets = try (0..<5000).map { _ in try Self.secret(32, in: allocator) }
        let statistics = allocator.statistics
        #expect(statistics.slotsInUse == 5000)
        #expect(statistics.slabCount == 5)  // 5000 / 1023 slots per slab, rounded up
        #expect(secrets.allSatisfy { $0.storageForTesting.isInSlab })
    }

    @Test("a secret larger than a slot gets a guarded allocation of its own")
    func largeSecretOwnAllocation() throws {
        let allocator = GuardedSlabAllocator()
        let small = try Self.secret(GuardedSlabAllocator.slotSize, in: allocator)
        let large = try Self.secret(GuardedSlabAllocator.slotSize + 1, in: allocator)
        #expect(small.storageForTesting.isInSlab)
        #expect(!large.storageForTesting.isInSlab)
        #expect(allocator.statistics.slotsInUse == 1)
        #expect(large.rawContentsForTesting() == [UInt8](repeating: 0x5A, count: 65))
    }

    @Test("a wiped secret's whole slot reads back as zeros")
    func wipedSlotIsZero() throws {
        let allocator = GuardedSlabAllocator()
        let secret = try Self.secret(32, in: allocator)
        let storage = secret.storageForTesting
        #expect(Self.bytes(at: storage.pointer, count: storage.capacity, in: storage.region).contains { $0 != 0 })
        secret.wipe()
        #expect(Self.bytes(at: storage.pointer, count: storage.capacity, in: storage.region)
            == [UInt8](repeating: 0, count: GuardedSlabAllocator.slotSize))
        #expect(secret.rawContentsForTesting() == [UInt8](repeating: 0, count: 32))
    }

    @Test("wiping a secret leaves the other secrets in its slab intact")
    func wipeSparesNeighbours() throws {
        let allocator = GuardedSlabAllocator()
        let before = try Self.secret(64, in: allocator, byte: 0x11)
        let wiped = try Self.secret(64, in: allocator, byte: 0x22)
        let after = try Self.secret(64, in: allocator, byte: 0x33)
        #expect(wiped.storageForTesting.region === before.storageForTesting.region)
        wiped.wipe()
        #expect(try before.withUnsafeBytes { Array($0) } == [UInt8](repeating: 0x11, count: 64))
        #expect(try after.withUnsafeBytes { Array($0) } == [UInt8](repeating: 0x33, count: 64))
    }

    @Test("a released slot is zero and is the next one handed out")
    func releasedSlotReusedZeroed() throws {
        let allocator = GuardedSlabAllocator()
        let neighbour = try Self.secret(32, in: allocator)
        var released: UnsafeMutableRawPointer?
        do {
            let secret = try Self.secret(32, in: allocator)
            released = secret.storageForTesting.pointer
        }
        let region = neighbour.storageForTesting.region
        let slot = try #require(released)
        #expect(Self.bytes(at: slot, count: GuardedSlabAllocator.slotSize, in: region)
            == [UInt8](repeating: 0, count: GuardedSlabAllocator.slotSize))
        let seenOnFill = Mutex<[UInt8]>([])
        let reused = try SecretBytes(count: 16, placement: .automatic(allocator)) { buffer in
            seenOnFill.withLock { $0 = Array(UnsafeRawBufferPointer(buffer)) }
            buffer.initializeMemory(as: UInt8.self, repeating: 0x77)
        }
        #expect(reused.storageForTesting.pointer == slot)
        #expect(seenOnFill.withLock { $0 } == [UInt8](repeating: 0, count: 16))
    }

    @Test("a slab that empties is freed while one empty slab is kept warm")
    func emptySlabFreedOneKeptWarm() throws {
        let allocator = GuardedSlabAllocator(slotsPerSlab: 4)
        // An optimized build may release a secret after its last use, so the
        // secrets each check counts are kept alive through it.
        var first = try (0..<4).map { _ in try Self.secret(32, in: allocator) }
        var second = [try Self.secret(32, in: allocator)]
        withExtendedLifetime(second) { #expect(allocator.statistics.slabCount == 2) }
        second.removeAll()  // the second slab empties; it is the only empty one, so it stays
        withExtendedLifetime(first) {
            #expect(allocator.statistics == GuardedSlabStatistics(slabCount: 2, emptySlabCount: 1, slotsInUse: 4,
                                                                  slotsPerSlab: 4))
        }
        first.removeAll()  // now the first empties too; one empty slab is enough
        #expect(allocator.statistics == GuardedSlabStatistics(slabCount: 1, emptySlabCount: 1, slotsInUse: 0, slotsPerSlab: 4))
        _ = (first, second)
    }

    @Test("new secrets go to a partly used slab before the warm empty one")
    func partlyUsedSlabPreferred() throws {
        let allocator = GuardedSlabAllocator(slotsPerSlab: 2)
        var secrets = try (0..<3).map { _ in try Self.secret(32, in: allocator) }
        secrets.removeFirst(2)  // the first slab empties and stays warm; the second holds one secret
        let next = try Self.secret(32, in: allocator)
        #expect(next.storageForTesting.region === secrets[0].storageForTesting.region)
        #expect(allocator.statistics == GuardedSlabStatistics(slabCount: 2, emptySlabCount: 1, slotsInUse: 2, slotsPerSlab: 2))
    }

    @Test("an idle slab is not readable, a read makes it read-only and a fill writable")
    func idleSlabIsNoAccess() throws {
        let allocator = GuardedSlabAllocator()
        let seenOnFill = Mutex("")
        let secret = try SecretBytes(count: 32, placement: .automatic(allocator)) { buffer in
            seenOnFill.withLock { $0 = Self.permissions(at: buffer.baseAddress!) }
        }
        let address = secret.storageForTesting.pointer
        #expect(seenOnFill.withLock { $0 } == "rw-")
        #expect(Self.permissions(at: address) == "---")
        #expect(Self.isReadableByKernel(address) == false)
        let seenOnRead = try secret.withUnsafeBytes { _ in Self.permissions(at: address) }
        #expect(seenOnRead == "r--")
        #expect(Self.permissions(at: address) == "---")
        #expect(Self.isReadableByKernel(address) == false)
    }

    @Test("a slab's slots are 64-byte aligned and fill exactly 64 KiB between guard pages")
    func slabLayout() throws {
        let allocator = GuardedSlabAllocator()
        let secret = try Self.secret(32, in: allocator)
        let first = secret.storageForTesting.pointer
        #expect(UInt(bitPattern: first) % 64 == 0)
        let readable = try #require(try secret.withUnsafeBytes { _ in Self.mapping(at: first) })
        // Guard pages on both sides are PROT_NONE, so the read-only mapping
        // is exactly the slab's data pages: 1023 slots plus libsodium's canary.
        #expect(readable.permissions == "r--")
        #expect(readable.end - readable.start == 65_536)  // 16 pages of 4 KiB (or 4 of 16, 1 of 64)
        #expect(UInt(bitPattern: first) - readable.start == 64)
    }

    @Test("overlapping reads of different secrets in one slab share one protection toggle")
    func overlappingReadsShareOneToggle() throws {
        let allocator = GuardedSlabAllocator()
        let a = try Self.secret(32, in: allocator, byte: 1)
        let b = try Self.secret(32, in: allocator, byte: 2)
        let region = a.storageForTesting.region
        #expect(b.storageForTesting.region === region)
        let before = region.protectionChanges
        let sum = try a.withUnsafeBytes { x in
            try b.withUnsafeBytes { y in
                try a.withUnsafeBytes { x2 in Int(x[0]) + Int(y[0]) + Int(x2[0]) }
            }
        }
        #expect(sum == 4)
        #expect(region.protectionChanges - before == 2)  // read-only once, no-access once
        #expect(region.protection == .noAccess)
    }

    @Test("a read opens a read-only key window that closes with it, and a fill a writable one")
    func keyWindowsFollowReadsAndFills() throws {
        let allocator = GuardedSlabAllocator()
        let classKey = try Self.secret(32, in: allocator, byte: 3)
        let region = classKey.storageForTesting.region
        let outside = SecretBytes.keyWindowsOpenOnThisThread
        try classKey.withUnsafeBytes { _ in
            #expect(region.protection == .readOnly)
            #expect(SecretBytes.keyWindowsOpenOnThisThread == outside + 1)
        }
        let derived = try SecretBytes(count: 32, placement: .automatic(allocator)) { out in
            #expect(region.protection == .readWrite)
            #expect(SecretBytes.keyWindowsOpenOnThisThread == outside + 1)
            out.copyBytes(from: [UInt8](repeating: 4, count: 32))
        }
        #expect(SecretBytes.keyWindowsOpenOnThisThread == outside)
        #expect(region.protection == .noAccess)
        #expect(try derived.withUnsafeBytes { Array($0) } == [UInt8](repeating: 4, count: 32))
    }

    @Test("a writable slab window makes one toggle for reads, a new secret and a wipe in its slab, then closes it")
    func writableSlabWindowSharesOneToggle() throws {
        let allocator = GuardedSlabAllocator()
        let classKey = try Self.secret(32, in: allocator, byte: 3)
        let region = classKey.storageForTesting.region
        let before = region.protectionChanges
        let derived = try classKey.withSlabWritable {
            #expect(region.protection == .readWrite)
            let derived = try SecretBytes(count: 32, placement: .automatic(allocator)) { out in
                let source = try classKey.withUnsafeBytes { Array($0) }
                for index in out.indices { out[index] = source[index] &+ 1 }
            }
            #expect(try derived.withUnsafeBytes { Array($0) } == [UInt8](repeating: 4, count: 32))
            derived.wipe()
            return derived
        }
        #expect(derived.storageForTesting.region === region)
        #expect(region.protectionChanges - before == 2)  // read-write once, no-access once
        #expect(region.protection == .noAccess)
        #expect(try classKey.withUnsafeBytes { Array($0) } == [UInt8](repeating: 3, count: 32))
    }

    @Test("filling a secret while reading a neighbour keeps the slab writable until the fill ends")
    func fillWhileReadingNeighbour() throws {
        let allocator = GuardedSlabAllocator()
        let key = try Self.secret(32, in: allocator, byte: 9)
        let derived = try SecretBytes(count: 32, placement: .automatic(allocator)) { out in
            let source = try key.withUnsafeBytes { Array($0) }
            // The nested read has ended; the slab must still be writable.
            for index in out.indices { out[index] = source[index] &+ 1 }
        }
        #expect(derived.storageForTesting.region === key.storageForTesting.region)
        #expect(try derived.withUnsafeBytes { Array($0) } == [UInt8](repeating: 10, count: 32))
        #expect(key.storageForTesting.region.protection == .noAccess)
    }

    @Test("eight threads reading, creating and wiping secrets in shared slabs keep every value intact")
    func concurrentReadsAndWipes() throws {
        let allocator = GuardedSlabAllocator(slotsPerSlab: 16)
        let keys = try (0..<48).map { try Self.secret(32, in: allocator, byte: UInt8($0 + 1)) }
        let failures = Counter()
        let wipesSeen = Counter()
        Self.onThreads(8) { thread in
            var state = UInt64(thread + 1) &* 0x9E37_79B9_7F4A_7C15
            for step in 0..<10_000 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let index = Int(state >> 33) % keys.count
                let expected = UInt8(index + 1)
                let intact = (try? keys[index].withUnsafeBytes { bytes in bytes.allSatisfy { $0 == expected } }) ?? false
                if !intact { failures.increment() }
                if step % 10 == 0 {
                    // A short-lived secret in the same slabs: filled, read, wiped
                    // (sometimes while another thread reads it), then released.
                    do {
                        let value = UInt8(truncatingIfNeeded: step)
                        let transient = try SecretBytes(count: 32, placement: .automatic(allocator)) {
                            $0.initializeMemory(as: UInt8.self, repeating: value)
                        }
                        if try !transient.withUnsafeBytes({ $0.allSatisfy { $0 == value } }) {
                            failures.increment()
                        }
                        transient.wipe()
                        if transient.rawContentsForTesting().contains(where: { $0 != 0 }) {
                            failures.increment()
                        }
                        wipesSeen.increment()
                    } catch {
                        failures.increment()
                    }
                }
            }
        }
        #expect(failures.value == 0)
        #expect(wipesSeen.value == 8_000)
        for (index, key) in keys.enumerated() {
            #expect(try key.withUnsafeBytes { Array($0) } == [UInt8](repeating: UInt8(index + 1), count: 32))
        }
        withExtendedLifetime(keys) { #expect(allocator.statistics.slotsInUse == 48) }
    }

    @Test("a wipe waits for readers on other threads and they never see a half-wiped key")
    func wipeDuringConcurrentReads() throws {
        let allocator = GuardedSlabAllocator()
        for round in 0..<50 {
            let secret = try Self.secret(64, in: allocator, byte: 0xC3)
            let torn = Counter()
            Self.onThreads(4) { thread in
                if thread == 0 {
                    secret.wipe()
                    return
                }
                for _ in 0..<200 {
                    do {
                        let bytes = try secret.withUnsafeBytes { Array($0) }
                        if bytes != [UInt8](repeating: 0xC3, count: 64) { torn.increment() }
                    } catch {
                        return  // wiped: refused, as promised
                    }
                }
            }
            #expect(torn.value == 0, "round \(round)")
            #expect(secret.isWiped)
            #expect(secret.rawContentsForTesting() == [UInt8](repeating: 0, count: 64))
        }
    }

    // MARK: - Helpers

    /// A counter threads can share.
    private final class Counter: Sendable {
        private let count = Atomic(0)
        func increment() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    /// A secret of `count` bytes, every one `byte`, from `allocator`.
    private static func secret(_ count: Int, in allocator: GuardedSlabAllocator, byte: UInt8 = 0x5A) throws -> SecretBytes {
        try SecretBytes(count: count, placement: .automatic(allocator)) {
            $0.initializeMemory(as: UInt8.self, repeating: byte)
        }
    }

    /// Raw bytes of a region, read the way the allocator reads: inside a read window.
    private static func bytes(at pointer: UnsafeMutableRawPointer, count: Int, in region: GuardedRegion) -> [UInt8] {
        region.beginRead()
        defer { region.endRead() }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The `rwx` permissions of the mapping holding `address`, from /proc/self/maps.
    private static func permissions(at address: UnsafeRawPointer) -> String {
        mapping(at: address)?.permissions ?? "unmapped"
    }

    /// The bounds and `rwx` permissions of the mapping holding `address`.
    private static func mapping(at address: UnsafeRawPointer) -> (start: UInt, end: UInt, permissions: String)? {
        guard let file = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(file) }
        let target = UInt(bitPattern: address)
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ")
            guard fields.count >= 2 else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
            if bounds.count == 2, bounds[0] <= target, target < bounds[1] {
                return (bounds[0], bounds[1], String(fields[1].prefix(3)))
            }
        }
        return nil
    }

    /// Whether the kernel can read one byte at `address` on our behalf: a
    /// `write` from it fails with EFAULT instead of crashing the process.
    private static func isReadableByKernel(_ address: UnsafeRawPointer) -> Bool {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { return true }
        defer { close(pipeEnds[0]); close(pipeEnds[1]) }
        return write(pipeEnds[1], address, 1) == 1
    }

    /// Runs `body(threadNumber)` on `count` fresh POSIX threads and waits for all.
    private static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        final class Work {
            let run: () -> Void
            init(_ run: @escaping () -> Void) { self.run = run }
        }
        var threads: [pthread_t] = []
        for number in 0..<count {
            let work = Unmanaged.passRetained(Work { body(number) }).toOpaque()
            var thread = pthread_t()
            let status = pthread_create(&thread, nil, { argument in
                Unmanaged<Work>.fromOpaque(argument!).takeRetainedValue().run()
                return nil
            }, work)
            precondition(status == 0, "pthread_create failed")
            threads.append(thread)
        }
        for thread in threads { pthread_join(thread, nil) }
    }
}

@Suite("BLAKE2b states in guarded memory")
struct HashStateTests {
    @Test("a keyed hash runs in a guarded state that is zero once it is done")
    func hashStateIsGuardedAndZeroed() throws {
        let key = try SecretBytes(count: 32) { buffer in
            for index in buffer.indices { buffer[index] = 0xA5 }
        }
        for _ in 0..<3 { _ = try KeyedBlake2b.mac(key: key, parts: [[1, 2, 3]]) }
        let (kept, allGuardedAndZero) = GuardedScratchPool.blake2bStates.withKeptScratchesForTesting { states in
            (states.count, states.allSatisfy { state in
                state.byteCount >= GuardedScratchPool.blake2bStates.byteCount
                    && Int(bitPattern: state.base) % 64 == 0
                    && state.protection == .readWrite
                    && UnsafeRawBufferPointer(start: state.base, count: state.byteCount).allSatisfy { $0 == 0 }
            })
        }
        #expect(kept >= 1)
        #expect(kept <= GuardedScratchPool.keptScratches)
        #expect(allGuardedAndZero)
    }
}
