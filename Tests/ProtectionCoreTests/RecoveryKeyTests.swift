import Foundation
@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// Issue #36 item 1 on the store: a recovery key resets a forgotten
/// passcode and leaves every file readable.
@Suite("Recovery key: create, reset a forgotten passcode, remove")
struct RecoveryKeyTests {
    private let passcode = "remembered"

    private func secret(_ text: String) -> SecretBytes { StoreFixture.secret(text) }



    /// A store with a passcode, a file in every class and a recovery key,
    /// restarted (the passcode now forgotten).
    private func forgottenPasscode(_ fixture: StoreFixture) throws -> SecretBytes {
        try fixture.store.setPasscode(secret(passcode), old: nil)
        try fixture.writeEveryClass()
        let recoveryKey = try fixture.store.createRecoveryKey(passcode: secret(passcode))
        #expect(recoveryKey.count == 32)
        #expect(fixture.store.status.recoveryKeySet)
        try fixture.restart()
        #expect(fixture.store.status.recoveryKeySet)
        return recoveryKey
    }

    @Test("with the recovery key a forgotten passcode is replaced; every class is readable, the old passcode is gone")
    func resetForgottenPasscode() throws {
        let fixture = try StoreFixture()
        let recoveryKey = try forgottenPasscode(fixture)
        #expect(fixture.store.lockState == .beforeFirstUnlock)
        let events = try fixture.store.resetPasscode(recoveryKey: recoveryKey, new: secret("new one"))
        #expect(fixture.store.lockState == .unlocked)
        #expect(events.count == 1)
        #expect(try fixture.readsEveryClass())

        try fixture.restart()
        let old = #expect(throws: ProtectionError.self) { _ = try fixture.store.unlock(passcode: secret(passcode)) }
        #expect(old?.code == .wrongPasscode)
        _ = try fixture.store.unlock(passcode: secret("new one"))
        #expect(try fixture.readsEveryClass())
        #expect(fixture.store.status.recoveryKeySet, "the recovery key stays valid after a reset")
    }

    @Test("a wrong recovery key is a failed attempt, on the unlock schedule, across restarts")
    func wrongRecoveryKeyIsCounted() throws {
        let fixture = try StoreFixture()
        let recoveryKey = try forgottenPasscode(fixture)
        for attempt in 1...5 {
            let error = #expect(throws: ProtectionError.self) {
                _ = try fixture.store.resetPasscode(recoveryKey: try SecretBytes.random(count: 32), new: secret("x"))
            }
            #expect(error?.code == .wrongPasscode)
            #expect(error?.message.contains("recovery key") == true)
            #expect(fixture.store.status.failedAttempts == attempt)
        }
        try fixture.restart()
        let limited = #expect(throws: ProtectionError.self) {
            _ = try fixture.store.resetPasscode(recoveryKey: recoveryKey, new: secret("new one"))
        }
        #expect(limited?.code == .rateLimited, "the fifth failure's 60 s wait holds after a restart, for the right key too")
        let unlockLimited = #expect(throws: ProtectionError.self) { _ = try fixture.store.unlock(passcode: secret(passcode)) }
        #expect(unlockLimited?.code == .rateLimited, "unlock and recovery share one record")
        fixture.clock.advance(bySeconds: 60)
        _ = try fixture.store.resetPasscode(recoveryKey: recoveryKey, new: secret("new one"))
        #expect(fixture.store.status.failedAttempts == 0)
    }

    @Test("changing the passcode keeps the recovery key valid; remove and erase make it useless")
    func passwdRemoveErase() throws {
        let fixture = try StoreFixture()
        let recoveryKey = try forgottenPasscode(fixture)
        _ = try fixture.store.unlock(passcode: secret(passcode))
        try fixture.store.setPasscode(secret("changed"), old: secret(passcode))
        try fixture.restart()
        _ = try fixture.store.resetPasscode(recoveryKey: recoveryKey, new: secret("after change"))
        #expect(try fixture.readsEveryClass())

        try fixture.store.removeRecoveryKey()
        #expect(!fixture.store.status.recoveryKeySet)
        try fixture.restart()
        let removed = #expect(throws: ProtectionError.self) {
            _ = try fixture.store.resetPasscode(recoveryKey: recoveryKey, new: secret("again"))
        }
        #expect(removed?.code == .notFound)
        #expect(fixture.store.status.failedAttempts == 0, "no recovery key to check: nothing was counted")

        _ = try fixture.store.unlock(passcode: secret("after change"))
        _ = try fixture.store.createRecoveryKey(passcode: secret("after change"))
        _ = try fixture.store.erase()
        #expect(!fixture.store.status.recoveryKeySet)
    }

    @Test("creating one needs a passcode, and the right one (a wrong one is counted)")
    func createNeedsPasscode() throws {
        let fixture = try StoreFixture()
        let none = #expect(throws: ProtectionError.self) { _ = try fixture.store.createRecoveryKey(passcode: secret("x")) }
        #expect(none?.code == .noPasscodeSet)
        try fixture.store.setPasscode(secret(passcode), old: nil)
        let wrong = #expect(throws: ProtectionError.self) { _ = try fixture.store.createRecoveryKey(passcode: secret("x")) }
        #expect(wrong?.code == .wrongPasscode)
        #expect(fixture.store.status.failedAttempts == 1)
        #expect(!fixture.store.status.recoveryKeySet)
        let first = try fixture.store.createRecoveryKey(passcode: secret(passcode))
        let second = try fixture.store.createRecoveryKey(passcode: secret(passcode))
        try fixture.restart()
        let replaced = #expect(throws: ProtectionError.self) {
            _ = try fixture.store.resetPasscode(recoveryKey: first, new: secret("n"))
        }
        #expect(replaced?.code == .wrongPasscode, "a new recovery key replaces the old one")
        _ = try fixture.store.resetPasscode(recoveryKey: second, new: secret("n"))
    }
}
