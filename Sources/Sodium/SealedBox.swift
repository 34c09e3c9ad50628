internal import CSodium

/// An X25519 key pair: the public half is not secret, the private half is
/// held in guarded memory.
public struct X25519KeyPair: Sendable {
    /// Public key length in bytes.
    public static let publicKeyByteCount = 32
    /// The 32-byte public key.
    public let publicKey: [UInt8]
    /// The private key, in guarded memory.
    public let privateKey: SecretBytes

    /// Pairs a stored public key with its unwrapped private key.
    public init(publicKey: [UInt8], privateKey: SecretBytes) throws {
        guard publicKey.count == Self.publicKeyByteCount, privateKey.count == 32 else {
            throw SodiumError(.invalidLength, "an X25519 key is 32 bytes")
        }
        self.publicKey = publicKey
        self.privateKey = privateKey
    }

    /// Pairs `privateKey` with the public key computed from it
    /// (`crypto_scalarmult_base`), for a key whose public half is not kept.
    public init(privateKey: SecretBytes) throws {
        try SodiumRuntime.ensureInitialised()
        var publicKey = [UInt8](repeating: 0, count: Self.publicKeyByteCount)
        let status = try privateKey.withUnsafeBytes { secret in
            guard secret.count == 32 else { return Int32(-1) }
            return publicKey.withUnsafeMutableBufferPointer { pk in
                crypto_scalarmult_base(pk.baseAddress!, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard status == 0 else { throw SodiumError(.invalidLength, "an X25519 private key is 32 bytes") }
        try self.init(publicKey: publicKey, privateKey: privateKey)
    }

    /// A fresh random key pair (`crypto_box_keypair`).
    public static func generate() throws -> X25519KeyPair {
        try SodiumRuntime.ensureInitialised()
        var publicKey = [UInt8](repeating: 0, count: publicKeyByteCount)
        let privateKey = try SecretBytes(count: 32) { secret in
            publicKey.withUnsafeMutableBufferPointer { pk in
                _ = crypto_box_keypair(pk.baseAddress!, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return try X25519KeyPair(publicKey: publicKey, privateKey: privateKey)
    }
}

/// Anonymous public-key encryption (`crypto_box_seal`): anyone with the
/// public key can seal; only the private key opens. Used for class B, so a
/// file can be created while no secret key is in memory.
public enum SealedBox {
    /// Bytes a sealed box adds to its message.
    public static let overheadByteCount = 48

    /// Seals `secret` to `publicKey`.
    public static func seal(_ secret: SecretBytes, to publicKey: [UInt8]) throws -> [UInt8] {
        try SodiumRuntime.ensureInitialised()
        guard publicKey.count == X25519KeyPair.publicKeyByteCount else {
            throw SodiumError(.invalidLength, "an X25519 public key is 32 bytes")
        }
        var sealed = [UInt8](repeating: 0, count: secret.count + overheadByteCount)
        try secret.withUnsafeBytes { message in
            sealed.withUnsafeMutableBufferPointer { out in
                _ = crypto_box_seal(out.baseAddress!, message.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                    UInt64(message.count), publicKey)
            }
        }
        return sealed
    }

    /// Opens a sealed box straight into guarded memory.
    public static func open(_ sealed: [UInt8], with keyPair: X25519KeyPair) throws -> SecretBytes {
        guard sealed.count > overheadByteCount else {
            throw SodiumError(.invalidLength, "sealed box is too short")
        }
        return try SecretBytes(count: sealed.count - overheadByteCount) { out in
            let status = try keyPair.privateKey.withUnsafeBytes { privateKey in
                crypto_box_seal_open(out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                     sealed, UInt64(sealed.count), keyPair.publicKey,
                                     privateKey.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            guard status == 0 else {
                throw SodiumError(.authenticationFailed, "sealed box did not open: wrong key or tampered data")
            }
        }
    }
}
