@testable import Sodium
import Synchronization
import Testing

@Suite("Secret bytes in guarded memory")
struct SecretBytesTests {
    @Test("a pinned readable copy has its own allocation, reads with no page-protection change, and is zeroed by wipe")
    func pinnedReadableCopy() throws {
        let original = try SecretBytes.random(count: 32)
        let copy = try SecretBytes.pinnedReadableCopy(of: original)
        #expect(try copy.constantTimeEquals(original))
        #expect(!copy.storageForTesting.isInSlab)
        let region = copy.storageForTesting.region
        #expect(region.protection == .readOnly)
        let changes = region.protectionChanges
        for _ in 0..<100 { _ = try copy.withUnsafeBytes { $0.count } }
        #expect(region.protectionChanges == changes)
        copy.wipe()
        #expect(copy.rawContentsForTesting().allSatisfy { $0 == 0 })
        #expect(region.protection == .readOnly)
    }

    @Test("a wiped secret reads back as zeros and refuses further use")
    func wipedSecretIsZeroAndUnusable() throws {
        let secret = try SecretBytes.random(count: 32)
        #expect(secret.rawContentsForTesting().contains { $0 != 0 })
        secret.wipe()
        #expect(secret.isWiped)
        #expect(secret.rawContentsForTesting() == [UInt8](repeating: 0, count: 32))
        #expect(throws: SodiumError.self) { try secret.withUnsafeBytes { _ in } }
        let key = try SecretBytes.random(count: 32)
        #expect(throws: SodiumError.self) {
            try XChaCha20Poly1305.wrap(secret, additionalData: [], key: key)
        }
    }

    @Test("releasing a secret goes through the same wipe")
    func releaseWipes() throws {
        let wipes = Mutex<[Bool]>([])
        do {
            let secret = try SecretBytes(count: 64, wipeObserver: { allZero in wipes.withLock { $0.append(allZero) } }) {
                $0.initializeMemory(as: UInt8.self, repeating: 0xA5)
            }
            #expect(secret.count == 64)
        }
        #expect(wipes.withLock { $0 } == [true])
    }

    @Test("wiping twice is harmless and observed once")
    func doubleWipe() throws {
        let wipes = Mutex(0)
        let secret = try SecretBytes(count: 16, wipeObserver: { _ in wipes.withLock { $0 += 1 } }) { _ in }
        secret.wipe()
        secret.wipe()
        #expect(wipes.withLock { $0 } == 1)
        _ = secret
    }

    @Test("descriptions never show the bytes")
    func descriptionIsRedacted() throws {
        let secret = try SecretBytes(utf8: "hunter2")
        #expect(String(describing: secret) == "SecretBytes(7 bytes, redacted)")
        #expect(String(reflecting: secret) == "SecretBytes(7 bytes, redacted)")
        #expect(!"\(secret)".contains("hunter2"))
    }

    @Test("an empty secret is refused with a typed error")
    func emptySecretRefused() {
        #expect(throws: SodiumError(.invalidLength, "a secret cannot be empty")) { try SecretBytes(utf8: "") }
    }

    @Test("overlapping readers on several threads see the same bytes")
    func concurrentReaders() async throws {
        let secret = try SecretBytes(count: 32) { $0.initializeMemory(as: UInt8.self, repeating: 7) }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var sum = 0
                    for _ in 0..<200 { sum += try secret.withUnsafeBytes { Int($0[31]) } }
                    return sum
                }
            }
            for try await sum in group { #expect(sum == 1400) }
        }
    }

    @Test("constant-time comparison tells equal and different secrets apart")
    func constantTimeEquality() throws {
        let a = try SecretBytes(utf8: "same")
        let b = try SecretBytes(utf8: "same")
        let c = try SecretBytes(utf8: "diff")
        #expect(try a.constantTimeEquals(b))
        #expect(try !a.constantTimeEquals(c))
    }
}
