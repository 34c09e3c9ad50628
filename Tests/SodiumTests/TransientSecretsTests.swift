@testable import Sodium
import Synchronization
import Testing

/// Each test owns its allocator, so it can check that no slab slot is taken.
@Suite("Transient secrets in scratch memory")
struct TransientSecretsTests {
    @Test("a secret made inside run lives in read-write scratch, takes no slab slot, changes no page protection, and is wiped with the run")
    func scratchAndWipe() throws {
        let allocator = GuardedSlabAllocator()
        let wipes = Mutex<[Bool]>([])
        var made: SecretBytes?
        try TransientSecrets.run {
            let secret = try SecretBytes(count: 32, placement: .automatic(allocator),
                                         wipeObserver: { allZero in wipes.withLock { $0.append(allZero) } }) {
                $0.initializeMemory(as: UInt8.self, repeating: 7)
            }
            let storage = secret.storageForTesting
            #expect(storage.isScratch && !storage.isInSlab)
            #expect(allocator.statistics.slotsInUse == 0)
            #expect(storage.region.protection == .readWrite)
            let changes = storage.region.protectionChanges
            #expect(try secret.withUnsafeBytes { Array($0) } == [UInt8](repeating: 7, count: 32))
            #expect(storage.region.protectionChanges == changes)
            made = secret
        }
        let secret = try #require(made)
        #expect(secret.isWiped)
        #expect(wipes.withLock { $0 } == [true])  // its whole scratch read back as zero
        #expect(throws: SodiumError.self) { try secret.withUnsafeBytes { _ in } }
        let after = try SecretBytes(count: 32, placement: .automatic(allocator)) { _ in }
        #expect(after.storageForTesting.isInSlab)
    }

    @Test("a run that throws still wipes; a secret larger than a slot gets its own allocation and is wiped too")
    func throwingRunAndLargeSecret() throws {
        struct Stop: Error {}
        var made: [SecretBytes] = []
        #expect(throws: Stop.self) {
            try TransientSecrets.run {
                made.append(try SecretBytes(count: 32) { $0.initializeMemory(as: UInt8.self, repeating: 1) })
                made.append(try SecretBytes(count: 200) { $0.initializeMemory(as: UInt8.self, repeating: 2) })
                throw Stop()
            }
        }
        #expect(made.count == 2)
        #expect(made[0].storageForTesting.isScratch)
        #expect(!made[1].storageForTesting.isScratch && !made[1].storageForTesting.isInSlab)
        let wiped = made.allSatisfy { $0.isWiped }
        let zeroed = made.allSatisfy { $0.rawContentsForTesting().allSatisfy { $0 == 0 } }
        #expect(wiped && zeroed)
    }

    @Test("an inner run wipes only its own secrets; a secret asking for its own allocation is left alone")
    func nestedRuns() throws {
        var outer: SecretBytes?
        var inner: SecretBytes?
        var own: SecretBytes?
        try TransientSecrets.run {
            outer = try SecretBytes.random(count: 32)
            try TransientSecrets.run {
                inner = try SecretBytes.random(count: 32)
                own = try SecretBytes(count: 32, placement: .ownAllocation) { _ in }
            }
            #expect(inner?.isWiped == true)
            #expect(outer?.isWiped == false)
            #expect(try outer?.withUnsafeBytes { $0.count } == 32)
        }
        #expect(outer?.isWiped == true)
        #expect(own?.isWiped == false)
    }
}
