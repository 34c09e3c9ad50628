internal import Sodium

/// A file's own random 256-bit key, in guarded memory, and the crypto done
/// with it: wrapping it for a class, authenticating the header, sealing and
/// opening content segments.
final class FileKey: Sendable {
    private static let headerKeyLabel = Array("protd.file.header-tag.v1".utf8)
    private let secret: SecretBytes
    /// The cipher of the file's segments (from its header).
    let cipher: ContentCipher
    private init(_ secret: SecretBytes, cipher: ContentCipher) {
        self.secret = secret
        self.cipher = cipher
    }

    /// A fresh random key for segments sealed with `cipher`.
    static func generate(cipher: ContentCipher) throws -> FileKey {
        FileKey(try SecretBytes.random(count: XChaCha20Poly1305.keyByteCount), cipher: cipher)
    }

    /// A fresh key and the header of a new file in `protection` with a
    /// random file id; checks the segment size. (`ProtectedStore.init`
    /// checks that this CPU runs the cipher.)
    static func newFile(protection: ProtectionClass, format: ContentFormat, binding: FileBinding,
                        keys: ClassKeys) throws -> (FileKey, FileHeader) {
        let segmentSize = format.segmentSize
        guard SegmentLayout.allowedSegmentSizes.contains(segmentSize) else {
            throw ProtectionError(.invalidArgument, "segment size must be within \(SegmentLayout.allowedSegmentSizes)")
        }
        return try keys.withSlabWritable(for: protection) {
            let key = try generate(cipher: format.cipher)
            do {
                return (key, try key.makeHeader(protection: protection, segmentSize: segmentSize,
                                                 fileID: try SecureRandom.bytes(16), binding: binding, keys: keys))
            } catch {
                key.wipe()
                throw error
            }
        }
    }

    /// Bytes of the wrapped key in a header: a sealed box for class B, a
    /// nonce, ciphertext and tag for the others.
    static func wrappedByteCount(for protection: ProtectionClass) -> Int {
        protection == .completeUnlessOpen
            ? 32 + SealedBox.overheadByteCount
            : XChaCha20Poly1305.nonceByteCount + 32 + XChaCha20Poly1305.tagByteCount
    }

    /// A complete header for this key in `protection`: wraps the key with
    /// the class's key from `keys` and computes the tag. Throws
    /// `protectedDataUnavailable` when that class key is not in memory.
    /// (`version` 1 makes a header as an older protd did, unbound; tests
    /// use it to check the upgrade.)
    func makeHeader(protection: ProtectionClass, segmentSize: Int, fileID: [UInt8], binding: FileBinding,
                    keys: ClassKeys, version: UInt8 = FileHeader.formatVersion) throws -> FileHeader {
        var header = FileHeader(version: version, binding: binding, algorithm: cipher, protection: protection,
                                segmentSize: segmentSize,
                                fileID: fileID, wrappedKey: [UInt8](repeating: 0, count: Self.wrappedByteCount(for: protection)),
                                tag: [])
        switch protection {
        case .completeUnlessOpen:
            header.wrappedKey = try SealedBox.seal(secret, to: keys.bPublic)
        default:
            guard let classKey = keys.symmetricKey(for: protection) else { throw ProtectionError.unavailable(protection) }
            header.wrappedKey = try XChaCha20Poly1305.wrap(secret, additionalData: header.wrapBinding, key: classKey)
        }
        header.tag = try tag(for: header)
        return header
    }

    /// Unwraps the key in `header` with the class key from `keys` and
    /// checks the header tag. Throws `protectedDataUnavailable` when the
    /// class key is not in memory and `integrityFailure` when anything
    /// does not authenticate. While `keys` holds the keys a first passcode
    /// replaced (`ClassKeys.previous`), a key that does not unwrap under
    /// the class key is tried under the previous one.
    static func unwrap(_ header: FileHeader, keys: ClassKeys) throws -> FileKey {
        guard header.version != 1 || keys.unboundFilesAllowed else {
            throw ProtectionError.integrity("the file is not bound to its name and owner (format version 1), and every "
                                            + "file here was bound already: it was copied in from elsewhere")
        }
        let key: FileKey
        do {
            key = try unwrapKey(header, with: keys.unwrapping(header.protection))
        } catch let error as ProtectionError where error.code == .integrityFailure {
            guard let previous = keys.previous?.unwrapping(header.protection) else { throw error }
            key = try unwrapKey(header, with: previous)
        }
        guard KeyedBlake2b.tagsEqual(try key.tag(for: header), header.tag) else {
            key.wipe()
            throw ProtectionError.integrity("the file header was modified")
        }
        // Only once the header (and so its algorithm byte) is authentic: a
        // flipped byte must read as tampering, not as a missing CPU feature.
        guard header.algorithm.isAvailable else {
            key.wipe()
            throw ProtectionError.cipherUnavailable(header.algorithm, for: "the file's content cipher", "the file is intact; read it with a protd that has that")
        }
        return key
    }

    /// The file key in `header`'s slot, opened with `classKey`.
    private static func unwrapKey(_ header: FileHeader, with classKey: UnwrappingKey) throws -> FileKey {
        do {
            switch classKey {
            case .pair(let pair):
                return FileKey(try SealedBox.open(header.wrappedKey, with: pair), cipher: header.algorithm)
            case .symmetric(let key):
                return FileKey(try XChaCha20Poly1305.unwrap(header.wrappedKey, additionalData: header.wrapBinding, key: key),
                               cipher: header.algorithm)
            }
        } catch let error as SodiumError where error.code == .authenticationFailed || error.code == .invalidLength {
            throw ProtectionError.integrity("the file key does not authenticate")
        }
    }

    /// The header tag: keyed BLAKE2b-256 under a key derived from this
    /// file key, over the header's first 108 bytes and (version 2) its binding.
    /// The derived key lives only here, in scratch memory (`TransientSecrets`).
    func tag(for header: FileHeader) throws -> [UInt8] {
        try TransientSecrets.run {
            let headerKey = try KeyedBlake2b.deriveKey(key: secret, parts: [Self.headerKeyLabel])
            return try KeyedBlake2b.mac(key: headerKey, parts: [header.tagInput], length: FileHeader.tagByteCount)
        }
    }

    /// Encrypts one segment into `output` (`nonce || ciphertext || tag`,
    /// `plaintext.count` plus the cipher's nonce and tag bytes) with a fresh
    /// random nonce.
    func sealSegment(
        _ plaintext: UnsafeRawBufferPointer, index: Int, final: Bool, fileID: [UInt8],
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        let nonceByteCount = cipher.aead.nonceByteCount
        let nonce = UnsafeMutableRawBufferPointer(rebasing: output[..<nonceByteCount])
        try SecureRandom.fill(nonce)
        try Self.withAssociatedData(fileID: fileID, index: index, final: final) { ad in
            try cipher.aead.seal(plaintext, additionalData: ad, nonce: UnsafeRawBufferPointer(nonce), key: secret,
                                       into: UnsafeMutableRawBufferPointer(rebasing: output[nonceByteCount...]))
        }
    }

    /// Verifies and decrypts one stored segment into `output` (`stored.count`
    /// less the cipher's nonce and tag bytes); throws `integrityFailure` on any
    /// mismatch of content, index, final flag or file id.
    func openSegment(
        _ stored: UnsafeRawBufferPointer, index: Int, final: Bool, fileID: [UInt8],
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        let nonceByteCount = cipher.aead.nonceByteCount
        do {
            try Self.withAssociatedData(fileID: fileID, index: index, final: final) { ad in
                try cipher.aead.open(UnsafeRawBufferPointer(rebasing: stored[nonceByteCount...]),
                                           additionalData: ad,
                                           nonce: UnsafeRawBufferPointer(rebasing: stored[..<nonceByteCount]),
                                           key: secret, into: output)
            }
        } catch let error as SodiumError where error.code == .authenticationFailed {
            throw ProtectionError.integrity("segment \(index) does not authenticate")
        }
    }

    /// Keeps the key readable (read-only) for the whole of `body`, so the
    /// segments it seals or opens share one page-protection change instead
    /// of one each. `body` does crypto only, never disk I/O: the window
    /// leaves every key in the slab readable (docs/SECURITY.md). Throws
    /// `secretWiped` once the key is wiped.
    func holdingAccess<R>(_ body: () throws -> R) throws -> R {
        try secret.withUnsafeBytes { _ in try body() }
    }

    /// Zeroes the key; later use throws.
    func wipe() { secret.wipe() }

    /// Whether the key was wiped (its handle was invalidated).
    var isWiped: Bool { secret.isWiped }

    /// Segment associated data: file id (16) || index (u64 LE) || final (u8).
    private static func withAssociatedData<R>(
        fileID: [UInt8], index: Int, final: Bool, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        var ad = fileID
        ad.appendLittleEndian(UInt64(index))
        ad.append(final ? 1 : 0)
        return try ad.withUnsafeBytes(body)
    }
}

/// A class key that opens a wrapped file key.
enum UnwrappingKey {
    /// A, C or D.
    case symmetric(SecretBytes)
    /// B: the sealed box needs the pair.
    case pair(X25519KeyPair)
}

extension ClassKeys {
    /// The key that unwraps file keys of `protection`; throws
    /// `protectedDataUnavailable` when it is not in memory.
    func unwrapping(_ protection: ProtectionClass) throws -> UnwrappingKey {
        if protection == .completeUnlessOpen, let pair = bKeyPair { return .pair(pair) }
        if let key = symmetricKey(for: protection) { return .symmetric(key) }
        throw ProtectionError.unavailable(protection)
    }

    /// The symmetric key of A, C or D when it is in memory.
    func symmetricKey(for protection: ProtectionClass) -> SecretBytes? {
        switch protection {
        case .complete: a
        case .completeUntilFirstUserAuthentication: c
        case .none: d
        case .completeUnlessOpen: nil
        }
    }
}

extension PreviousClassKeys {
    /// The previous key of `protection` when it is in memory (D has none).
    func unwrapping(_ protection: ProtectionClass) -> UnwrappingKey? {
        switch protection {
        case .complete: a.map(UnwrappingKey.symmetric)
        case .completeUnlessOpen: bPrivate.flatMap { try? X25519KeyPair(privateKey: $0) }.map(UnwrappingKey.pair)
        case .completeUntilFirstUserAuthentication: c.map(UnwrappingKey.symmetric)
        case .none: nil
        }
    }
}
