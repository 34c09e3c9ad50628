internal import CSodium

/// AEGIS-256 (libsodium's `crypto_aead_aegis256_*`, draft-irtf-cfrg-aegis-aead):
/// a 32-byte key, a 32-byte nonce that is safe to draw at random for every
/// message, and a 32-byte tag. Built on the AES round function, it runs
/// about three times as fast as AES-256-GCM on a CPU with AES instructions
/// and needs no per-message subkey: its nonce is long enough on its own.
///
/// libsodium has it from 1.0.19 (Debian 12 ships 1.0.18); protd uses it only where the CPU has AES
/// instructions (AES-NI, ARMv8's crypto extensions; `isAvailable`), as for
/// AES-256-GCM: libsodium would otherwise fall back to AES in software.
/// Elsewhere, and with a libsodium that lacks it, every call throws
/// `unsupportedCPU`.
///
/// libsodium leaves AEGIS's 96-byte state, from which that message could be
/// forged, in its stack frame; the stack each call used is zeroed as soon
/// as it returns (`stackUsed`).
public enum AEGIS256: RandomNonceAEAD {
    private static let name = "AEGIS-256"
    public static var nonceByteCount: Int { 32 }
    public static var tagByteCount: Int { 32 }
    /// Stack bytes zeroed after each call: libsodium's AEGIS-256 frames
    /// (state, two 32-byte blocks, the tag) take well under half of it.
    private static let stackUsed = 2048

    /// The first libsodium release with AEGIS-256.
    public static let minimumLibsodiumVersion = "1.0.19"

    /// Whether the libsodium protd was built against has AEGIS-256 (decided
    /// at build time by the C shim, never by a link error).
    public static var isInLinkedLibsodium: Bool { protd_aegis256_compiled_in() == 1 }

    /// Whether this libsodium has AEGIS-256 and this CPU has AES instructions.
    public static var isAvailable: Bool {
        (try? SodiumRuntime.ensureInitialised()) != nil && protd_aegis256_has_aes_instructions() == 1
    }

    public static func seal(
        _ plaintext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: SecretBytes, into output: UnsafeMutableRawBufferPointer
    ) throws {
        try checkSeal(name, key: key, nonce: nonce, plaintext: plaintext.count, output: output.count)
        try checkAvailable()
        defer { sodium_stackzero(stackUsed) }
        let status = try key.withUnsafeBytes { keyBytes in
            protd_aegis256_encrypt(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count),
                nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
                keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else { throw SodiumError(.invalidLength, "\(name) cannot seal a message this long") }
    }

    public static func open(
        _ ciphertext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
        key: SecretBytes, into output: UnsafeMutableRawBufferPointer
    ) throws {
        try checkOpen(name, key: key, nonce: nonce, ciphertext: ciphertext.count, output: output.count)
        try checkAvailable()
        defer { sodium_stackzero(stackUsed) }
        let status = try key.withUnsafeBytes { keyBytes in
            protd_aegis256_decrypt(
                output.baseAddress?.assumingMemoryBound(to: UInt8.self),
                ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count),
                nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
                keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else { throw authenticationFailed(clearing: output) }
    }

    private static func checkAvailable() throws {
        guard isAvailable else {
            throw SodiumError(.unsupportedCPU, isInLinkedLibsodium
                ? "\(name) needs a CPU with AES instructions; this one lacks them"
                : "\(name) needs libsodium \(minimumLibsodiumVersion) or later; this one is \(SodiumRuntime.version)")
        }
    }
}
