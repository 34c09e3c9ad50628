internal import CSodium

/// An authenticated cipher with a 32-byte key and a nonce long enough to
/// draw at random for every message: what a protd content segment is
/// sealed with (`XChaCha20Poly1305`, `AES256GCMRandomNonce`, `AEGIS256`).
/// Output is ciphertext then tag.
public protocol RandomNonceAEAD: Sendable {
    /// Nonce length in bytes (24 unless the cipher says otherwise).
    static var nonceByteCount: Int { get }
    /// Authentication tag length in bytes (16 unless the cipher says otherwise).
    static var tagByteCount: Int { get }

    /// Encrypts `plaintext` into `output`, which must hold exactly
    /// `plaintext.count + tagByteCount` bytes (ciphertext then tag).
    static func seal(
        _ plaintext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: SecretBytes, into output: UnsafeMutableRawBufferPointer
    ) throws

    /// Verifies and decrypts `ciphertext` (ciphertext then tag) into
    /// `output`, which must hold `ciphertext.count - tagByteCount` bytes. On failure
    /// `output` is zeroed and `authenticationFailed` is thrown.
    static func open(
        _ ciphertext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: SecretBytes, into output: UnsafeMutableRawBufferPointer
    ) throws
}

extension RandomNonceAEAD {
    /// Key length in bytes.
    public static var keyByteCount: Int { 32 }
    /// Nonce length in bytes, unless the cipher says otherwise.
    public static var nonceByteCount: Int { 24 }
    /// Authentication tag length in bytes, unless the cipher says otherwise.
    public static var tagByteCount: Int { 16 }

    /// Checks, before libsodium runs, the key, the nonce and that `output`
    /// is `plaintext` plus a tag; `cipher` names the cipher in messages.
    static func checkSeal(_ cipher: String, key: SecretBytes, nonce: UnsafeRawBufferPointer, plaintext: Int, output: Int) throws {
        try checkLengths(cipher, key: key, nonce: nonce)
        guard output == plaintext + tagByteCount else {
            throw SodiumError(.invalidLength, "ciphertext buffer must be plaintext length plus \(tagByteCount)")
        }
    }

    /// Checks the key, the nonce and that `output` is `ciphertext` less a tag.
    static func checkOpen(_ cipher: String, key: SecretBytes, nonce: UnsafeRawBufferPointer, ciphertext: Int, output: Int) throws {
        try checkLengths(cipher, key: key, nonce: nonce)
        guard ciphertext >= tagByteCount, output == ciphertext - tagByteCount else {
            throw SodiumError(.invalidLength, "plaintext buffer must be ciphertext length minus \(tagByteCount)")
        }
    }

    /// Zeroes what a failed open may have written and says why it failed.
    static func authenticationFailed(clearing output: UnsafeMutableRawBufferPointer) -> SodiumError {
        if let base = output.baseAddress { sodium_memzero(base, output.count) }
        return SodiumError(.authenticationFailed, "authentication failed: wrong key or tampered data")
    }

    private static func checkLengths(_ cipher: String, key: SecretBytes, nonce: UnsafeRawBufferPointer) throws {
        try SodiumRuntime.ensureInitialised()
        guard key.count == keyByteCount else {
            throw SodiumError(.invalidLength, "an \(cipher) key is \(keyByteCount) bytes")
        }
        guard nonce.count == nonceByteCount else {
            throw SodiumError(.invalidLength, "an \(cipher) nonce is \(nonceByteCount) bytes")
        }
    }
}
