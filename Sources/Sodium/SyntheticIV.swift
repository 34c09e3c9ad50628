internal import CSodium

/// Deterministic authenticated encryption (SIV: Rogaway and Shrimpton's
/// synthetic-IV construction) for short values that must encrypt the same
/// way every time, such as on-disk names looked up by their plaintext:
///
/// ```
/// iv     = keyed BLAKE2b-128(macKey, len(context) u32 LE || context || plaintext)
/// sealed = iv || XChaCha20(encryptionKey, nonce: iv || 8 zero bytes) XOR plaintext
/// ```
/// Equal plaintexts under equal contexts seal equally, and that is all
/// that leaks; opening recomputes the IV, so a sealed value opened under
/// another context (another directory, another namespace) fails.
public enum SyntheticIV {
    /// Bytes the IV adds in front of the ciphertext.
    public static let ivByteCount = 16

    /// Seals `plaintext` bound to `context`.
    public static func seal(_ plaintext: [UInt8], context: [UInt8], macKey: SecretBytes,
                            encryptionKey: SecretBytes) throws -> [UInt8] {
        var sealed = [UInt8](repeating: 0, count: ivByteCount + plaintext.count)
        try sealed.withUnsafeMutableBytes { out in
            let iv = UnsafeMutableRawBufferPointer(rebasing: out[..<ivByteCount])
            try syntheticIV(plaintext, context: context, macKey: macKey, into: iv)
            try plaintext.withUnsafeBytes { input in
                try xor(input, iv: UnsafeRawBufferPointer(iv), key: encryptionKey,
                        into: UnsafeMutableRawBufferPointer(rebasing: out[ivByteCount...]))
            }
        }
        return sealed
    }

    /// Opens what `seal` made under the same context and keys; throws
    /// `authenticationFailed` for anything else.
    public static func open(_ sealed: [UInt8], context: [UInt8], macKey: SecretBytes,
                            encryptionKey: SecretBytes) throws -> [UInt8] {
        guard sealed.count >= ivByteCount else {
            throw SodiumError(.authenticationFailed, "authentication failed: the sealed value is too short")
        }
        var plaintext = [UInt8](repeating: 0, count: sealed.count - ivByteCount)
        try sealed.withUnsafeBytes { input in
            try plaintext.withUnsafeMutableBytes { output in
                try xor(UnsafeRawBufferPointer(rebasing: input[ivByteCount...]),
                        iv: UnsafeRawBufferPointer(rebasing: input[..<ivByteCount]), key: encryptionKey, into: output)
            }
        }
        var expected = [UInt8](repeating: 0, count: ivByteCount)
        try expected.withUnsafeMutableBytes { try syntheticIV(plaintext, context: context, macKey: macKey, into: $0) }
        guard KeyedBlake2b.tagsEqual(expected, Array(sealed[..<ivByteCount])) else {
            throw SodiumError(.authenticationFailed, "authentication failed: wrong key, context or tampered data")
        }
        return plaintext
    }

    /// The IV of `plaintext` under `context`, written into `iv` (16 bytes).
    private static func syntheticIV(_ plaintext: [UInt8], context: [UInt8], macKey: SecretBytes,
                                    into iv: UnsafeMutableRawBufferPointer) throws {
        var length = UInt32(context.count).littleEndian
        try withUnsafeBytes(of: &length) { lengthBytes in
            try context.withUnsafeBytes { contextBytes in
                try plaintext.withUnsafeBytes { plaintextBytes in
                    try KeyedBlake2b.hash(key: macKey, buffers: [lengthBytes, contextBytes, plaintextBytes], into: iv)
                }
            }
        }
    }

    /// `input` XOR the XChaCha20 stream of `key` and nonce `iv || 0^8`, into `output` (as long as `input`).
    private static func xor(_ input: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer, key: SecretBytes,
                            into output: UnsafeMutableRawBufferPointer) throws {
        try SodiumRuntime.ensureInitialised()
        guard key.count == Int(crypto_stream_xchacha20_KEYBYTES) else {
            throw SodiumError(.invalidLength, "the SIV encryption key must be \(crypto_stream_xchacha20_KEYBYTES) bytes")
        }
        precondition(input.count == output.count, "SIV output must be as long as its input")
        guard !input.isEmpty else { return }
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(crypto_stream_xchacha20_NONCEBYTES)) { nonce in
            nonce.initialize(repeating: 0)
            UnsafeMutableRawBufferPointer(nonce).copyMemory(from: iv)
            try key.withUnsafeBytes { keyBytes in
                _ = crypto_stream_xchacha20_xor(output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                input.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                UInt64(input.count), nonce.baseAddress!,
                                                keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }
}
