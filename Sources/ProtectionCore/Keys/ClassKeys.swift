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

    /// Wipes and drops the keys a lock removes: A and B-private.
    mutating func evictForLock() {
        a?.wipe(); a = nil
        bPrivate?.wipe(); bPrivate = nil
    }

    /// Wipes every key (shutdown, erase).
    mutating func wipeAll() {
        evictForLock()
        c?.wipe(); c = nil
        d.wipe()
    }

    /// The class B key pair, when its private half is in memory.
    var bKeyPair: X25519KeyPair? {
        bPrivate.flatMap { try? X25519KeyPair(publicKey: bPublic, privateKey: $0) }
    }
}
