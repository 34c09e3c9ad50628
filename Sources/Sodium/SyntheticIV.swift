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
        let iv = try syntheticIV(plaintext, context: context, macKey: macKey)
        return try iv + xor(plaintext, iv: iv, key: encryptionKey)
    }

    /// Opens what `seal` made under the same context and keys; throws
    /// `authenticationFailed` for anything else.
    public static func open(_ sealed: [UInt8], context: [UInt8], macKey: SecretBytes,
                            encryptionKey: SecretBytes) throws -> [UInt8] {
        guard sealed.count >= ivByteCount else {
            throw SodiumError(.authenticationFailed, "authentication failed: the sealed value is too short")
        }
        let iv = Array(sealed[..<ivByteCount])
        let plaintext = try xor(Array(sealed[ivByteCount...]), iv: iv, key: encryptionKey)
        guard KeyedBlake2b.tagsEqual(try syntheticIV(plaintext, context: context, macKey: macKey), iv) else {
            throw SodiumError(.authenticationFailed, "authentication failed: wrong key, context or tampered data")
        }
        return plaintext
    }

    private static func syntheticIV(_ plaintext: [UInt8], context: [UInt8], macKey: SecretBytes) throws -> [UInt8] {
        var length: [UInt8] = []
        var count = UInt32(context.count)
        for _ in 0..<4 { length.append(UInt8(count & 0xFF)); count >>= 8 }
        return try KeyedBlake2b.mac(key: macKey, parts: [length, context, plaintext], length: ivByteCount)
    }

    private static func xor(_ input: [UInt8], iv: [UInt8], key: SecretBytes) throws -> [UInt8] {
        try SodiumRuntime.ensureInitialised()
        guard key.count == Int(crypto_stream_xchacha20_KEYBYTES) else {
            throw SodiumError(.invalidLength, "the SIV encryption key must be \(crypto_stream_xchacha20_KEYBYTES) bytes")
        }
        let nonce = iv + [UInt8](repeating: 0, count: Int(crypto_stream_xchacha20_NONCEBYTES) - ivByteCount)
        var output = [UInt8](repeating: 0, count: input.count)
        guard !input.isEmpty else { return output }
        try key.withUnsafeBytes { keyBytes in
            _ = crypto_stream_xchacha20_xor(&output, input, UInt64(input.count), nonce,
                                            keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return output
    }
}
