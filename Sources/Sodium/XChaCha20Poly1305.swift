internal import CSodium

/// XChaCha20-Poly1305-IETF authenticated encryption (libsodium's
/// `crypto_aead_xchacha20poly1305_ietf_*`), with a 24-byte nonce that is
/// safe to pick at random for every message.
public enum XChaCha20Poly1305: RandomNonceAEAD {
    private static let name = "XChaCha20-Poly1305"

    /// Encrypts `plaintext` into `output`, which must hold exactly
    /// `plaintext.count + tagByteCount` bytes (ciphertext then tag).
    public static func seal(
        _ plaintext: UnsafeRawBufferPointer,
        additionalData: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer,
        key: SecretBytes,
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        try checkSeal(name, key: key, nonce: nonce, plaintext: plaintext.count, output: output.count)
        try key.withUnsafeBytes { keyBytes in
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self), nil,
                plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count),
                nil,
                nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
                keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// Verifies and decrypts `ciphertext` (ciphertext then tag) into
    /// `output`, which must hold `ciphertext.count - tagByteCount` bytes.
    /// On failure `output` is zeroed and `authenticationFailed` is thrown.
    public static func open(
        _ ciphertext: UnsafeRawBufferPointer,
        additionalData: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer,
        key: SecretBytes,
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        try checkOpen(name, key: key, nonce: nonce, ciphertext: ciphertext.count, output: output.count)
        let status = try key.withUnsafeBytes { keyBytes in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                output.baseAddress?.assumingMemoryBound(to: UInt8.self), nil,
                nil,
                ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count),
                nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
                keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else { throw authenticationFailed(clearing: output) }
    }

    /// Wraps a secret (a key) under `key`: returns `nonce || ciphertext || tag`
    /// with a fresh random nonce. The wrapped form is safe to store.
    public static func wrap(_ secret: SecretBytes, additionalData: [UInt8], key: SecretBytes) throws -> [UInt8] {
        let nonce = try SecureRandom.bytes(nonceByteCount)
        var wrapped = [UInt8](repeating: 0, count: nonceByteCount + secret.count + tagByteCount)
        try secret.withUnsafeBytes { plain in
            try wrapped.withUnsafeMutableBytes { out in
                try additionalData.withUnsafeBytes { ad in
                    try nonce.withUnsafeBytes { n in
                        out.copyMemory(from: n)
                        try seal(plain, additionalData: ad, nonce: n, key: key,
                                 into: UnsafeMutableRawBufferPointer(rebasing: out[nonceByteCount...]))
                    }
                }
            }
        }
        return wrapped
    }

    /// Unwraps what `wrap` produced straight into guarded memory.
    public static func unwrap(_ wrapped: [UInt8], additionalData: [UInt8], key: SecretBytes) throws -> SecretBytes {
        guard wrapped.count > nonceByteCount + tagByteCount else {
            throw SodiumError(.invalidLength, "wrapped key is too short")
        }
        return try SecretBytes(count: wrapped.count - nonceByteCount - tagByteCount) { out in
            try wrapped.withUnsafeBytes { all in
                try additionalData.withUnsafeBytes { ad in
                    try open(UnsafeRawBufferPointer(rebasing: all[nonceByteCount...]),
                             additionalData: ad,
                             nonce: UnsafeRawBufferPointer(rebasing: all[..<nonceByteCount]),
                             key: key, into: out)
                }
            }
        }
    }
}
