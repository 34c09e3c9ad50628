import Foundation
@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// Finding F12: unlocks at login count per login user, so other users'
/// mistyped passwords delay (or erase) nobody else.
@Suite("Unlock attempts at login count per login user")
struct LoginAttemptsTests {
    private func secret(_ text: String) -> SecretBytes { StoreFixture.secret(text) }

    @Test("five wrong logins of one user delay that user only; the machine's count and other users are untouched")
    func perUser() throws {
        let fixture = try StoreFixture(policy: try FailedAttemptPolicy(delaysInSeconds: [0, 0, 0, 0, 60], eraseAfter: 5))
        try fixture.setPasscodeAndRestart("right")
        let alice = AttemptCounter.login(uid: 1001)
        for attempt in 1...5 {
            let error = #expect(throws: ProtectionError.self) {
                _ = try fixture.store.unlock(passcode: secret("alice's own password"), countedAgainst: alice)
            }
            #expect(error?.code == .wrongPasscode, "attempt \(attempt): no erase for login attempts")
            #expect(error?.message.contains("uid 1001") == true)
        }
        #expect(fixture.store.status.failedAttempts == 0, "the machine's count is untouched")
        try fixture.restart()
        let limited = #expect(throws: ProtectionError.self) {
            _ = try fixture.store.unlock(passcode: secret("right"), countedAgainst: alice)
        }
        #expect(limited?.code == .rateLimited, "alice's delay survives a restart")
        // Bob, and the plain unlock, are not held up by alice's failures.
        _ = try fixture.store.unlock(passcode: secret("right"), countedAgainst: .login(uid: 1002))
        #expect(fixture.store.lockState == .unlocked)
        fixture.clock.advance(bySeconds: 60)
        _ = try fixture.store.unlock(passcode: secret("right"), countedAgainst: alice)
        try fixture.restart()
        let again = #expect(throws: ProtectionError.self) {
            _ = try fixture.store.unlock(passcode: secret("wrong"), countedAgainst: alice)
        }
        #expect(again?.message.contains("1 consecutive") == true, "a success reset alice's count")
    }

    @Test("login counts survive a device secret change stopped after the key bag moved to the new secret")
    func countsSurviveAnInterruptedDeviceSecretChange() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        func bag(_ deviceSecret: SecretBytes) throws -> KeyBag {
            try KeyBag(path: directory.appending("keybag"), deviceSecret: deviceSecret, cost: .minimum, policy: .standard,
                       clock: clock)
        }
        let before = try bag(try DeviceSecret.load(from: .file(path: directory.appending("device-key"))))
        try before.setPasscode(secret("right"), old: nil)
        for _ in 1...3 {
            #expect(throws: ProtectionError.self) { try before.unlock(passcode: secret("wrong"), countedAgainst: .login(uid: 7)) }
        }
        let counts = directory.appending("login-attempts")
        let underOldSecret = try Data(contentsOf: URL(fileURLWithPath: counts))
        let newSecret = try SecretBytes.random(count: 32)
        try before.changeDeviceSecret(to: newSecret, passcode: secret("right"))
        // As if it stopped right after the key bag: the counts under the new
        // secret still beside the file, which is still under the old one.
        try FileManager.default.moveItem(atPath: counts, toPath: counts + ".next")
        try underOldSecret.write(to: URL(fileURLWithPath: counts))
        let after = try bag(newSecret)
        let error = #expect(throws: ProtectionError.self) { try after.unlock(passcode: secret("wrong"), countedAgainst: .login(uid: 7)) }
        #expect(error?.message.contains("4 consecutive") == true, "\(error?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: counts + ".next"))
    }

    @Test("the record is kept in a file bound to the device secret; one that does not authenticate starts afresh")
    func fileIsAuthenticated() throws {
        let fixture = try StoreFixture()
        try fixture.setPasscodeAndRestart("right")
        #expect(throws: ProtectionError.self) {
            _ = try fixture.store.unlock(passcode: secret("wrong"), countedAgainst: .login(uid: 7))
        }
        let path = fixture.directory.path + "/login-attempts"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.count == 4 + 2 + 4 + 16 + 32)
        bytes[12] ^= 1
        try bytes.write(to: URL(fileURLWithPath: path))
        try fixture.restart()
        let error = #expect(throws: ProtectionError.self) {
            _ = try fixture.store.unlock(passcode: secret("wrong"), countedAgainst: .login(uid: 7))
        }
        #expect(error?.message.contains("1 consecutive") == true, "the altered file was dropped")
        _ = try fixture.store.unlock(passcode: secret("right"), countedAgainst: .login(uid: 7))
        #expect(!FileManager.default.fileExists(atPath: path), "no failures pending: no file")
    }
}
