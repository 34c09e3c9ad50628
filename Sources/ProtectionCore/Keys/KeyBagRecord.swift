internal import Sodium

/// The key bag as stored on disk (docs/FORMAT.md, "Key bag"): everything
/// but the MAC, which `encode`/`decode` add and check.
struct KeyBagRecord: Equatable {
    static let magic: [UInt8] = Array("PDKB".utf8)
    static let version: UInt16 = 1
    static let wrappedKeyByteCount = XChaCha20Poly1305.nonceByteCount + 32 + XChaCha20Poly1305.tagByteCount
    static let macByteCount = 32
    /// Bytes covered by the wrapped keys' associated data.
    static let boundPrefixByteCount = 72
    static let encodedByteCount = 404

    /// Whether A, B-private and C are wrapped under a passcode key (else
    /// under the device-only no-passcode key).
    var hasPasscode: Bool
    var salt: [UInt8]
    var cost: Argon2id.Cost
    var classBPublicKey: [UInt8]
    var wrappedA: [UInt8]
    var wrappedBPrivate: [UInt8]
    var wrappedC: [UInt8]
    var wrappedD: [UInt8]
    var failedAttempts: UInt32
    var lastAttemptAt: Int64

    /// The bytes the wrapped keys are bound to: magic, version, flags, salt,
    /// cost and the class B public key, so none can be swapped unnoticed.
    var boundPrefix: [UInt8] {
        var bytes = Self.magic
        bytes.appendLittleEndian(Self.version)
        bytes.appendLittleEndian(UInt16(hasPasscode ? 1 : 0))
        bytes += salt
        bytes.appendLittleEndian(cost.operations)
        bytes.appendLittleEndian(cost.memoryBytes)
        bytes += classBPublicKey
        return bytes
    }

    /// Associated data for the wrapped key of `protection`.
    func associatedData(for protection: ProtectionClass) -> [UInt8] {
        boundPrefix + [protection.rawValue]
    }

    /// The full file: record then a keyed BLAKE2b MAC under `macKey`.
    func encode(macKey: SecretBytes) throws -> [UInt8] {
        var bytes = boundPrefix
        bytes += wrappedA + wrappedBPrivate + wrappedC + wrappedD
        bytes.appendLittleEndian(failedAttempts)
        bytes.appendLittleEndian(lastAttemptAt)
        bytes += try KeyedBlake2b.mac(key: macKey, parts: [bytes], length: Self.macByteCount)
        precondition(bytes.count == Self.encodedByteCount, "key bag layout out of step with its size")
        return bytes
    }

    /// Parses and authenticates a stored key bag.
    static func decode(_ bytes: [UInt8], macKey: SecretBytes) throws -> KeyBagRecord {
        guard bytes.count == encodedByteCount else {
            throw ProtectionError(.keyBagCorrupt, "key bag has \(bytes.count) bytes, expected \(encodedByteCount)")
        }
        let body = Array(bytes[..<(encodedByteCount - macByteCount)])
        let expected = try KeyedBlake2b.mac(key: macKey, parts: [body], length: macByteCount)
        guard KeyedBlake2b.tagsEqual(expected, Array(bytes[(encodedByteCount - macByteCount)...])) else {
            throw ProtectionError(.keyBagCorrupt,
                                  "key bag failed authentication: it was modified, or the device secret is not the one it was made with")
        }
        var reader = ByteReader(body)
        guard reader.read(4) == magic else { throw ProtectionError(.keyBagCorrupt, "not a protd key bag") }
        guard reader.readLittleEndian(UInt16.self) == version else {
            throw ProtectionError(.keyBagCorrupt, "unsupported key bag version")
        }
        // Lengths are fixed and were checked above, so the reads cannot fail.
        let flags: UInt16 = reader.readLittleEndian()!
        guard flags & ~1 == 0 else { throw ProtectionError(.keyBagCorrupt, "key bag has unknown flags \(flags)") }
        let salt = reader.read(Argon2id.saltByteCount)!
        let cost = Argon2id.Cost(operations: reader.readLittleEndian()!, memoryBytes: reader.readLittleEndian()!)
        do {
            try cost.validate()
        } catch {
            throw ProtectionError(.keyBagCorrupt, "key bag has an unusable passcode cost: \(error)")
        }
        return KeyBagRecord(
            hasPasscode: flags & 1 == 1,
            salt: salt,
            cost: cost,
            classBPublicKey: reader.read(32)!,
            wrappedA: reader.read(wrappedKeyByteCount)!,
            wrappedBPrivate: reader.read(wrappedKeyByteCount)!,
            wrappedC: reader.read(wrappedKeyByteCount)!,
            wrappedD: reader.read(wrappedKeyByteCount)!,
            failedAttempts: reader.readLittleEndian()!,
            lastAttemptAt: reader.readLittleEndian()!)
    }
}
