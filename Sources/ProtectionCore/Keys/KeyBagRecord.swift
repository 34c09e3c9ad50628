internal import Sodium

/// The key bag as stored on disk (docs/FORMAT.md, "Key bag"): everything
/// but the MAC, which `encode`/`decode` add and check. Reads versions 1
/// and 2; writes the version it holds, which `KeyBag` moves to 2 as soon
/// as it holds the keys and the key that wraps them.
struct KeyBagRecord: Equatable {
    static let magic: [UInt8] = Array("PDKB".utf8)
    /// The version protd writes.
    static let currentVersion: UInt16 = 2
    static let wrappedKeyByteCount = XChaCha20Poly1305.nonceByteCount + 32 + XChaCha20Poly1305.tagByteCount
    static let macByteCount = 32
    /// Bytes before the wrapped keys: magic, version, flags, salt, cost, B public key.
    static let headerByteCount = 72
    /// Size without the previous keys or a recovery key (every version 1 key bag).
    static let baseByteCount = 404
    /// Bytes of the previous keys (version 2, flag bit 1).
    static let previousByteCount = 3 * wrappedKeyByteCount
    /// Bytes of the recovery wrapping (version 2, flag bit 2): the three
    /// wraps under the recovery key, wrapped again under a device key.
    static let recoveryByteCount = XChaCha20Poly1305.nonceByteCount + 3 * wrappedKeyByteCount
        + XChaCha20Poly1305.tagByteCount
    /// Size with the previous keys and no recovery key.
    static let withPreviousByteCount = baseByteCount + previousByteCount

    private enum Flag {
        static let passcode: UInt16 = 1
        static let previousKeys: UInt16 = 2
        static let recovery: UInt16 = 4
        static let filesBound: UInt16 = 8
        static let namesSealed: UInt16 = 16
    }

    /// 1 or 2: which associated data the wrapped keys are bound to.
    var version: UInt16 = Self.currentVersion
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
    /// Version 2 only: the class keys the first passcode replaced (A,
    /// B-private, C, concatenated), wrapped under the passcode key, kept
    /// until every file is rewrapped under the new ones (`HeaderRewrap`).
    var previousWrapped: [UInt8]?
    /// Version 2 only: A, B-private and C wrapped under a key from the
    /// recovery key, all wrapped again under a key from the device secret
    /// (`KeyBag.createRecovery`).
    var recoveryWrapped: [UInt8]?
    /// Version 2 only: every file's header is version 2, bound to its
    /// name and owner, so version 1 headers are refused (`HeaderRewrap`).
    var filesBound = false
    /// Version 2 only: the store's names on disk are sealed (store layout
    /// 2, `StoreNames`); a protd that predates them refuses this key bag
    /// (an unknown flag) rather than show an empty store.
    var namesSealed = false
    var failedAttempts: UInt32
    var lastAttemptAt: Int64

    private var flags: UInt16 {
        (hasPasscode ? Flag.passcode : 0) | (previousWrapped != nil ? Flag.previousKeys : 0)
            | (recoveryWrapped != nil ? Flag.recovery : 0) | (filesBound ? Flag.filesBound : 0)
            | (namesSealed ? Flag.namesSealed : 0)
    }

    /// Bytes 0..<72: magic, version, flags, salt, cost, class B public key.
    private var header: [UInt8] {
        var bytes = Self.magic
        bytes.appendLittleEndian(version)
        bytes.appendLittleEndian(flags)
        bytes += salt
        bytes.appendLittleEndian(cost.operations)
        bytes.appendLittleEndian(cost.memoryBytes)
        bytes += classBPublicKey
        return bytes
    }

    /// Associated data for the wrapped key of `protection` (`previous`:
    /// of the set the first passcode replaced). Version 1 binds the whole
    /// header, so its wrapped keys change with any flag or the public key;
    /// version 2 binds magic, version, salt and cost, so the public key
    /// can be checked against the private one at unlock and reported as
    /// such (`KeyBag.unlock`), and a flag change needs no rewrap.
    func associatedData(for protection: ProtectionClass, previous: Bool = false) -> [UInt8] {
        if version == 1 { return header + [protection.rawValue] }
        var bytes = Self.magic
        bytes.appendLittleEndian(version)
        bytes += salt
        bytes.appendLittleEndian(cost.operations)
        bytes.appendLittleEndian(cost.memoryBytes)
        return bytes + [(previous ? 0x80 : 0) | protection.rawValue]
    }

    /// Associated data of the recovery wrapping: magic, version and a
    /// label, without the salt, so a passcode change leaves it valid; with
    /// `protection`, of that class key's wrap under the recovery key, else
    /// of the outer wrap under the device key.
    func recoveryAssociatedData(for protection: ProtectionClass? = nil) -> [UInt8] {
        var bytes = Self.magic
        bytes.appendLittleEndian(version)
        bytes += Array("recovery".utf8)
        return bytes + (protection.map { [0x40 | $0.rawValue] } ?? [])
    }

    /// The file size the flags call for.
    private static func byteCount(flags: UInt16) -> Int {
        baseByteCount + (flags & Flag.previousKeys != 0 ? previousByteCount : 0)
            + (flags & Flag.recovery != 0 ? recoveryByteCount : 0)
    }

    /// The full file: record then a keyed BLAKE2b MAC under `macKey`.
    func encode(macKey: SecretBytes) throws -> [UInt8] {
        precondition(version == Self.currentVersion || flags == flags & Flag.passcode, "version 1 has no other flag")
        var bytes = header
        bytes += wrappedA + wrappedBPrivate + wrappedC + wrappedD
        bytes += previousWrapped ?? []
        bytes += recoveryWrapped ?? []
        bytes.appendLittleEndian(failedAttempts)
        bytes.appendLittleEndian(lastAttemptAt)
        bytes += try KeyedBlake2b.mac(key: macKey, parts: [bytes], length: Self.macByteCount)
        precondition(bytes.count == Self.byteCount(flags: flags), "key bag layout out of step with its size")
        return bytes
    }

    /// Parses and authenticates a stored key bag.
    static func decode(_ bytes: [UInt8], macKey: SecretBytes) throws -> KeyBagRecord {
        guard bytes.count >= baseByteCount, bytes.count <= byteCount(flags: Flag.previousKeys | Flag.recovery) else {
            throw ProtectionError(.keyBagCorrupt, "key bag has \(bytes.count) bytes, not a size a key bag has")
        }
        let body = Array(bytes[..<(bytes.count - macByteCount)])
        let expected = try KeyedBlake2b.mac(key: macKey, parts: [body], length: macByteCount)
        guard KeyedBlake2b.tagsEqual(expected, Array(bytes[(bytes.count - macByteCount)...])) else {
            throw ProtectionError(.keyBagCorrupt,
                                  "key bag failed authentication: it was modified, or the device secret is not the one it was made with")
        }
        var reader = ByteReader(body)
        guard reader.read(4) == magic else { throw ProtectionError(.keyBagCorrupt, "not a protd key bag") }
        let version: UInt16 = reader.readLittleEndian()!
        guard version == 1 || version == 2 else { throw ProtectionError(.keyBagCorrupt, "unsupported key bag version") }
        // Lengths were checked above, so the reads cannot fail.
        let flags: UInt16 = reader.readLittleEndian()!
        let known = version == 1 ? Flag.passcode : Flag.passcode | Flag.previousKeys | Flag.recovery | Flag.filesBound | Flag.namesSealed
        guard flags & ~known == 0 else { throw ProtectionError(.keyBagCorrupt, "key bag has unknown flags \(flags)") }
        guard bytes.count == byteCount(flags: flags) else {
            throw ProtectionError(.keyBagCorrupt, "key bag's size does not match its flags")
        }
        guard flags & Flag.passcode != 0 || flags & (Flag.previousKeys | Flag.recovery) == 0 else {
            throw ProtectionError(.keyBagCorrupt, "key bag has previous keys or a recovery key but no passcode")
        }
        let salt = reader.read(Argon2id.saltByteCount)!
        let cost = Argon2id.Cost(operations: reader.readLittleEndian()!, memoryBytes: reader.readLittleEndian()!)
        do {
            try cost.validate()
        } catch {
            throw ProtectionError(.keyBagCorrupt, "key bag has an unusable passcode cost: \(error)")
        }
        return KeyBagRecord(
            version: version,
            hasPasscode: flags & Flag.passcode != 0,
            salt: salt,
            cost: cost,
            classBPublicKey: reader.read(32)!,
            wrappedA: reader.read(wrappedKeyByteCount)!,
            wrappedBPrivate: reader.read(wrappedKeyByteCount)!,
            wrappedC: reader.read(wrappedKeyByteCount)!,
            wrappedD: reader.read(wrappedKeyByteCount)!,
            previousWrapped: flags & Flag.previousKeys != 0 ? reader.read(previousByteCount)! : nil,
            recoveryWrapped: flags & Flag.recovery != 0 ? reader.read(recoveryByteCount)! : nil,
            filesBound: flags & Flag.filesBound != 0,
            namesSealed: flags & Flag.namesSealed != 0,
            failedAttempts: reader.readLittleEndian()!,
            lastAttemptAt: reader.readLittleEndian()!)
    }
}
