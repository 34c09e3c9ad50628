internal import CSodium
internal import Synchronization

/// Keyed BLAKE2b (`crypto_generichash` with a key): key derivation from a
/// secret and labelled inputs, and message authentication codes.
public enum KeyedBlake2b {
    /// Derives a new secret of `length` bytes from `key` over the
    /// concatenation of `parts` (labels, salts, other secrets' bytes).
    public static func deriveKey(key: SecretBytes, parts: [[UInt8]], length: Int = 32) throws -> SecretBytes {
        try SecretBytes(count: length) { out in
            try hash(key: key, parts: parts, into: out)
        }
    }

    /// Derives a new secret from `key` over `label` followed by another
    /// secret's bytes, without copying either out of guarded memory.
    public static func deriveKey(key: SecretBytes, label: [UInt8], secret: SecretBytes, length: Int = 32) throws -> SecretBytes {
        try SecretBytes(count: length) { out in
            try label.withUnsafeBytes { labelBytes in
                try secret.withUnsafeBytes { secretBytes in
                    try hash(key: key, buffers: [labelBytes, secretBytes], into: out)
                }
            }
        }
    }

    /// A `length`-byte authentication tag over `parts` (not secret).
    public static func mac(key: SecretBytes, parts: [[UInt8]], length: Int = 32) throws -> [UInt8] {
        var tag = [UInt8](repeating: 0, count: length)
        try tag.withUnsafeMutableBytes { try hash(key: key, parts: parts, into: $0) }
        return tag
    }

    /// Constant-time comparison of two tags.
    public static func tagsEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count, !lhs.isEmpty else { return false }
        return sodium_memcmp(lhs, rhs, lhs.count) == 0
    }

    private static func hash(key: SecretBytes, parts: [[UInt8]], into out: UnsafeMutableRawBufferPointer) throws {
        // Array-to-pointer conversion gives stable pointers only inside the
        // closure, so the parts are joined first (they are not secret).
        let joined = parts.flatMap { $0 }
        try joined.withUnsafeBytes { try hash(key: key, buffers: [$0], into: out) }
    }

    private static func hash(key: SecretBytes, buffers: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer) throws {
        try SodiumRuntime.ensureInitialised()
        guard (Int(crypto_generichash_BYTES_MIN)...Int(crypto_generichash_BYTES_MAX)).contains(out.count),
              (Int(crypto_generichash_KEYBYTES_MIN)...Int(crypto_generichash_KEYBYTES_MAX)).contains(key.count)
        else {
            throw SodiumError(.invalidLength, "BLAKE2b output must be 16-64 bytes and its key 16-64 bytes")
        }
        try HashStatePool.shared.withState { typed in
            try key.withUnsafeBytes { keyBytes in
                _ = crypto_generichash_init(typed, keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                            keyBytes.count, out.count)
            }
            for buffer in buffers where buffer.count > 0 {
                _ = crypto_generichash_update(typed, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                              UInt64(buffer.count))
            }
            _ = crypto_generichash_final(typed, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count)
        }
    }
}

/// Guarded memory for BLAKE2b states. A keyed `crypto_generichash_init`
/// copies the key into the state (as its first block) and the state then
/// holds values derived from it, so the state is key material: it lives
/// in `sodium_malloc`'d memory (guard pages, `mlock`, excluded from core
/// dumps) and is zeroed as soon as the hash is done. A few zeroed states
/// are kept for the next hashes, left read-write since they hold nothing
/// between uses: a hash then costs no system call (a fresh guarded
/// allocation per hash cost about ten, and every file open or create
/// hashes twice).
final class HashStatePool: Sendable {
    static let shared = HashStatePool()
    /// Zeroed states kept at most; beyond that they are freed.
    static let keptStates = 8
    /// The state's size rounded up to its 64-byte alignment: `sodium_malloc`
    /// puts an allocation right before a guard page, so its start is
    /// aligned only as far as its size is.
    static let stateByteCount = (crypto_generichash_statebytes() + 63) & ~63

    private let free = Mutex<[GuardedRegion]>([])

    /// Lends a zeroed state for `body`, zeroing it again after.
    func withState<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        let region = try free.withLock { $0.popLast() } ?? Self.makeState()
        defer {
            sodium_memzero(region.base, region.byteCount)
            free.withLock { states in
                if states.count < Self.keptStates { states.append(region) }
            }
        }
        return try body(OpaquePointer(region.base))
    }

    private static func makeState() throws -> GuardedRegion {
        let region = try GuardedRegion(byteCount: stateByteCount)
        precondition(Int(bitPattern: region.base) % 64 == 0, "BLAKE2b state must be 64-byte aligned")
        // Read-write for good: it holds zeros whenever it is not in use.
        region.beginWrite()
        return region
    }

    /// Runs `body` on the states kept for reuse, with nobody able to take
    /// one meanwhile (a test hook).
    func withKeptStatesForTesting<R: Sendable>(_ body: ([GuardedRegion]) -> R) -> R {
        free.withLock { body($0) }
    }
}
