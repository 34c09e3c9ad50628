internal import Sodium

/// Moving the key bag from a former device secret to the configured one
/// (docs/DESIGN.md, "Changing the device secret"): adding the systemd
/// credential `device-key` to a store made with the state directory's
/// `device-key` file, or setting `device-key.file` while the credential
/// it was made with is still loaded.
///
/// Without a passcode everything is rewrapped at start. With one, A,
/// B-private and C are wrapped under a key mixed from the passcode and the
/// device secret, so the rewrap waits for the next successful unlock (or
/// passcode change); until then the key bag stays as it was, under the
/// former secret, which stays where it is. The key bag is written once,
/// atomically, and the former secret file is destroyed only after that
/// write is durable: a crash at any point leaves a key bag that one of the
/// two secrets opens, and the next start finishes the job.
struct DeviceSecretMigration {
    /// The configured secret, which the key bag is to be under.
    let target: SecretBytes
    /// Where the former secret is; destroyed after the rewrap when a file.
    let former: DeviceSecret.Source

    /// Opens (or creates) the key bag with `make`: under the configured
    /// secret, or, when that fails to authenticate it, under the former
    /// one, migrating it. Returns the migration still to do (a passcode is
    /// set, or the rewrap failed). The configured secret's error is the
    /// one thrown when neither opens it.
    static func openKeyBag(
        target: DeviceSecret.Source, former: DeviceSecret.Source?,
        notify: (StoreNotice) -> Void, make: (SecretBytes) throws -> KeyBag
    ) throws -> (KeyBag, pending: DeviceSecretMigration?) {
        let targetSecret = try DeviceSecret.load(from: target)
        do {
            let keyBag = try make(targetSecret)
            if let former { removeLeftover(former, notify: notify) }
            return (keyBag, nil)
        } catch let error as ProtectionError where error.code == .keyBagCorrupt {
            guard let former, let formerSecret = try? DeviceSecret.loadIfPresent(former),
                  let keyBag = try? make(formerSecret) else { throw error }
            let migration = DeviceSecretMigration(target: targetSecret, former: former)
            if keyBag.hasPasscode {
                notify(.pendingUntilUnlock(former: former.path))
                return (keyBag, migration)
            }
            return (keyBag, migration.complete(keyBag, passcode: nil, notify: notify) ? nil : migration)
        }
    }

    /// Rewraps `keyBag` under the configured secret (`passcode` is the one
    /// just verified, when one is set), then destroys the former secret
    /// file. Returns false when the rewrap failed: the key bag is unchanged
    /// and the migration is still to do.
    func complete(_ keyBag: KeyBag, passcode: SecretBytes?, notify: (StoreNotice) -> Void) -> Bool {
        do {
            try keyBag.changeDeviceSecret(to: target, passcode: passcode)
        } catch {
            notify(.failed("the key bag stays under the former device secret \(former.path) "
                           + "and is rewrapped at the next unlock: \(error)"))
            return false
        }
        notify(.migrated(former: former.path))
        Self.removeLeftover(former, notify: notify)
        return true
    }

    /// Destroys a former secret file the key bag no longer needs.
    private static func removeLeftover(_ former: DeviceSecret.Source, notify: (StoreNotice) -> Void) {
        guard case .file(let path) = former, Posix.exists(path) else { return }
        do {
            try DeviceSecret.destroy(former)
            notify(.destroyedFormer(path))
        } catch {
            notify(.failed("the former device secret \(path) could not be removed; the next start tries again: \(error)"))
        }
    }
}
