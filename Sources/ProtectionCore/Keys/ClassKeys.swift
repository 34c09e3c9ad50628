internal import Sodium

/// The class keys currently in memory. A missing key means the classes that
/// need it are unavailable in the current lock state.
struct ClassKeys {
    /// Class A (`complete`).
    var a: SecretBytes?
    /// Class B (`completeUnlessOpen`) key pair; the private half may be absent.
    var bPrivate: SecretBytes?
    /// Class B public key: always present, so B files can always be created.
    let bPublic: [UInt8]
    /// Class C (`completeUntilFirstUserAuthentication`).
    var c: SecretBytes?
    /// Class D (`none`): always present.
    let d: SecretBytes
    /// The A, B and C keys the first passcode replaced, while files may
    /// still be wrapped under them (`HeaderRewrap`); they unwrap only.
    var previous: PreviousClassKeys?
    /// Whether files with a version 1 header, bound to no name or owner,
    /// are still read: until every file was rewritten as version 2.
    var unboundFilesAllowed = false

    /// Wipes and drops the keys a lock removes: A and B-private.
    mutating func evictForLock() {
        a?.wipe(); a = nil
        bPrivate?.wipe(); bPrivate = nil
        previous?.evictForLock()
    }

    /// Wipes and drops the class C key (a return to `beforeFirstUnlock`).
    mutating func evictClassC() {
        c?.wipe(); c = nil
        previous?.evictClassC()
    }

    /// Wipes every key (shutdown, erase).
    mutating func wipeAll() {
        evictForLock()
        evictClassC()
        d.wipe()
        previous?.wipeAll()
        previous = nil
    }

    /// Runs `body`, crypto only, with the slab of `protection`'s class key
    /// writable (`SecretBytes.withSlabWritable`): creating or unwrapping a
    /// file key and checking its header then change page protection once,
    /// when the file key shares that slab (the usual case). Without that
    /// class key in memory, `body` runs as it is.
    func withSlabWritable<R>(for protection: ProtectionClass, _ body: () throws -> R) rethrows -> R {
        guard let anchor = classSecret(for: protection) else { return try body() }
        return try anchor.withSlabWritable(body)
    }

    /// Runs `body`, crypto only, with the class key of `protection`
    /// readable and the keys it makes transient (`TransientSecrets`): a
    /// one-off read unwraps the file key, checks its header and opens the
    /// content with one read-only window on the class key's slab, however
    /// full the slabs are, and nothing it made outlives it. Without that
    /// class key in memory, `body` runs in the scope alone (and fails
    /// where it needs the key).
    func withClassKeyReadable<R>(for protection: ProtectionClass, _ body: () throws -> R) throws -> R {
        guard let anchor = classSecret(for: protection) else { return try TransientSecrets.run(body) }
        return try anchor.withUnsafeBytes { _ in try TransientSecrets.run(body) }
    }

    /// The secret that opens `protection`'s file keys (B's private key for
    /// class B), when it is in memory.
    private func classSecret(for protection: ProtectionClass) -> SecretBytes? {
        protection == .completeUnlessOpen ? bPrivate : symmetricKey(for: protection)
    }

    /// The class B key pair, when its private half is in memory.
    var bKeyPair: X25519KeyPair? {
        bPrivate.flatMap { try? X25519KeyPair(publicKey: bPublic, privateKey: $0) }
    }
}

/// The class keys a first passcode replaced, kept (under the passcode)
/// until every file wrapped under them is rewrapped under the new ones.
struct PreviousClassKeys {
    var a: SecretBytes?
    var bPrivate: SecretBytes?
    var c: SecretBytes?

    mutating func evictForLock() {
        a?.wipe(); a = nil
        bPrivate?.wipe(); bPrivate = nil
    }

    mutating func evictClassC() {
        c?.wipe(); c = nil
    }

    mutating func wipeAll() {
        evictForLock()
        evictClassC()
    }
}
