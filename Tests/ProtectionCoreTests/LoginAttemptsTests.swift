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
