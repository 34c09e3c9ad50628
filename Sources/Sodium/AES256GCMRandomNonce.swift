internal import CSodium

/// AES-256-GCM (libsodium's `crypto_aead_aes256gcm_*`) with a 24-byte nonce
/// that is safe to draw at random for every message. GCM's own 12-byte
/// nonce is not: past about 2^32 random nonces under one key a repeat
/// becomes likely, and a repeat leaks the authentication key. So each
/// message gets its own subkey, keyed BLAKE2b-256 of the key over a label
/// and the nonce's first 12 bytes, and GCM's nonce is the last 12: a repeat
/// needs the same 192 random bits. (The shape of C2SP's XAES-256-GCM, with
/// BLAKE2b in place of its AES-CMAC derivation; not compatible with it.)
///
/// The subkey and its expanded round keys live in guarded memory, zeroed
/// after each call, and the stack libsodium used is zeroed too. libsodium
/// runs AES-256-GCM only where the CPU has AES instructions (AES-NI and
/// PCLMUL on x86-64; `isAvailable`); elsewhere every call throws
/// `unsupportedCPU`.
public enum AES256GCMRandomNonce: RandomNonceAEAD {
    private static let name = "AES-256-GCM"
    private static let subkeyLabel = Array("protd.aes-256-gcm.subkey.v1".utf8)
    /// Nonce bytes that derive the subkey; the rest is GCM's nonce.
    private static let subkeyNonceByteCount = 12
    /// A scratch holds the expanded key state, then the subkey.
    private static let stateByteCount = (crypto_aead_aes256gcm_statebytes() + 63) & ~63
    private static let scratches = GuardedScratchPool(byteCount: stateByteCount + keyByteCount, alignment: 64)
    /// The scratch pool (a test hook).
    static var scratchesForTesting: GuardedScratchPool { scratches }

    /// Whether this CPU runs libsodium's AES-256-GCM.
    public static var isAvailable: Bool {
        (try? SodiumRuntime.ensureInitialised()) != nil && crypto_aead_aes256gcm_is_available() == 1
    }

    public static func seal(
        _ plaintext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: SecretBytes, into output: UnsafeMutableRawBufferPointer
    ) throws {
        try checkSeal(name, key: key, nonce: nonce, plaintext: plaintext.count, output: output.count)
        try withSubkeyState(key: key, nonce: nonce) { state, gcmNonce in
            _ = crypto_aead_aes256gcm_encrypt_afternm(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self), nil,
                plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count),
                nil, gcmNonce, state)
        }
    }

    public static func open(
        _ ciphertext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: SecretBytes, into output: UnsafeMutableRawBufferPointer
    ) throws {
        try checkOpen(name, key: key, nonce: nonce, ciphertext: ciphertext.count, output: output.count)
        let status = try withSubkeyState(key: key, nonce: nonce) { state, gcmNonce in
            crypto_aead_aes256gcm_decrypt_afternm(
                output.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, nil,
                ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count),
                gcmNonce, state)
        }
        guard status == 0 else { throw authenticationFailed(clearing: output) }
    }

    /// Derives this message's subkey from `key` and the first 12 bytes of
    /// `nonce`, expands it, and runs `body` with the expanded state and
    /// GCM's nonce (the last 12 bytes). libsodium 1.0.18's AES-NI code
    /// leaves the GHASH key `H` and the tag mask `E(J0)` in its stack frame,
    /// which would let a reader of the stack forge the segment, so the stack
    /// `body` used is zeroed as soon as it returns. (1.0.20's `_afternm`
    /// functions keep well under 1 KiB there: counters and tag blocks.)
    private static func withSubkeyState<R>(
        key: SecretBytes, nonce: UnsafeRawBufferPointer,
        _ body: (UnsafeMutablePointer<crypto_aead_aes256gcm_state>, UnsafePointer<UInt8>) throws -> R
    ) throws -> R {
        guard crypto_aead_aes256gcm_is_available() == 1 else {
            throw SodiumError(.unsupportedCPU, "AES-256-GCM needs a CPU with AES-NI and PCLMUL; this one lacks them")
        }
        return try scratches.withScratch { base in
            let subkey = UnsafeMutableRawBufferPointer(start: base + stateByteCount, count: keyByteCount)
            try subkeyLabel.withUnsafeBytes { label in
                try KeyedBlake2b.hash(key: key, buffers: [label, UnsafeRawBufferPointer(rebasing: nonce[..<subkeyNonceByteCount])],
                                      into: subkey)
            }
            let state = base.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self)
            _ = crypto_aead_aes256gcm_beforenm(state, subkey.baseAddress!.assumingMemoryBound(to: UInt8.self))
            defer { sodium_stackzero(4096) }
            return try body(state, (nonce.baseAddress! + subkeyNonceByteCount).assumingMemoryBound(to: UInt8.self))
        }
    }
}
