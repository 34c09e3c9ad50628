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

    /// Keyed BLAKE2b of the concatenation of `buffers` into `out` (16 to
    /// 64 bytes), without copying any of them.
    static func hash(key: SecretBytes, buffers: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer) throws {
        try SodiumRuntime.ensureInitialised()
        guard (Int(crypto_generichash_BYTES_MIN)...Int(crypto_generichash_BYTES_MAX)).contains(out.count),
              (Int(crypto_generichash_KEYBYTES_MIN)...Int(crypto_generichash_KEYBYTES_MAX)).contains(key.count)
        else {
            throw SodiumError(.invalidLength, "BLAKE2b output must be 16-64 bytes and its key 16-64 bytes")
        }
        try GuardedScratchPool.blake2bStates.withScratch { base in
            let typed = OpaquePointer(base)
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
