import Foundation
import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

@Suite("Key bag: passcodes, failed attempts, persistence")
struct KeyBagTests {
    private func makeBag(
        _ directory: TemporaryDirectory, clock: ManualWallClock, policy: FailedAttemptPolicy = .standard
    ) throws -> KeyBag {
        let secret = try DeviceSecret.load(from: .file(path: directory.appending("device-key")))
        return try KeyBag(path: directory.appending("keybag"), deviceSecret: secret, cost: .minimum, policy: policy,
                          clock: clock)
    }

    private func secret(_ text: String) -> SecretBytes { StoreFixture.secret(text) }

    @Test("the device secret is created once, 32 bytes, mode 0600, and reused")
    func deviceSecretFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("device-key")
        let first = try DeviceSecret.load(from: .file(path: path))
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect((attributes[.size] as? NSNumber)?.intValue == 32)
        #expect(try first.constantTimeEquals(DeviceSecret.load(from: .file(path: path))))
    }

    @Test("a wrong-length or missing systemd credential is refused")
    func credentialChecks() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let credential = directory.appending("device-key")
        _ = FileManager.default.createFile(atPath: credential, contents: Data(repeating: 7, count: 31))
        #expect(throws: ProtectionError.self) { try DeviceSecret.load(from: .credential(path: credential)) }
        #expect(throws: ProtectionError.self) { try DeviceSecret.load(from: .credential(path: directory.appending("none"))) }
    }

    @Test("unlock succeeds with the right passcode and fails with a wrong one")
    func rightAndWrongPasscode() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        try makeBag(directory, clock: clock).setPasscode(secret("right"), old: nil)
        let bag = try makeBag(directory, clock: clock)
        #expect(bag.hasPasscode)
        let error = #expect(throws: ProtectionError.self) { try bag.unlock(passcode: secret("wrong")) }
        #expect(error?.code == .wrongPasscode)
        #expect(bag.failedAttempts == 1)
        try bag.unlock(passcode: secret("right"))
        #expect(bag.failedAttempts == 0)
    }

    @Test("the failed-attempt count survives reloading the key bag from disk")
    func attemptCountPersists() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        try makeBag(directory, clock: clock).setPasscode(secret("right"), old: nil)
        for expected in 1...3 {
            let bag = try makeBag(directory, clock: clock)
            #expect(throws: ProtectionError.self) { try bag.unlock(passcode: secret("wrong")) }
            #expect(try makeBag(directory, clock: clock).failedAttempts == expected)
        }
    }

    @Test("the delay schedule is 1-4 none, 5th 60 s, 6th 300 s, 7th-8th 900 s, 9th+ 3600 s, enforced across reloads")
    func delaySchedule() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        try makeBag(directory, clock: clock).setPasscode(secret("right"), old: nil)
        let expectedDelays: [Int64] = [0, 0, 0, 0, 60, 300, 900, 900, 3600, 3600]
        for (index, delay) in expectedDelays.enumerated() {
            let bag = try makeBag(directory, clock: clock)
            let error = #expect(throws: ProtectionError.self) { try bag.unlock(passcode: secret("wrong")) }
            #expect(error?.code == .wrongPasscode)
            #expect(bag.failedAttempts == index + 1)
            #expect(bag.secondsUntilNextAttempt == delay)
            if delay > 0 {
                // Inside the delay even the right passcode is refused, and a reload does not lift it.
                clock.advance(bySeconds: delay - 1)
                let limited = #expect(throws: ProtectionError.self) {
                    try makeBag(directory, clock: clock).unlock(passcode: secret("right"))
                }
                #expect(limited?.code == .rateLimited)
                #expect(limited?.retryAfterSeconds == 1)
                #expect(try makeBag(directory, clock: clock).failedAttempts == index + 1)
                clock.advance(bySeconds: 1)
            }
        }
        let bag = try makeBag(directory, clock: clock)
        try bag.unlock(passcode: secret("right"))
        #expect(bag.failedAttempts == 0)
    }

    @Test("a clock set backwards does not shorten the wait")
    func clockBackwards() {
        let policy = FailedAttemptPolicy.standard
        #expect(policy.secondsUntilNextAttempt(failures: 5, lastAttemptAt: 1000, now: 500) == 60)
        #expect(policy.secondsUntilNextAttempt(failures: 5, lastAttemptAt: 1000, now: 1030) == 30)
        #expect(policy.secondsUntilNextAttempt(failures: 4, lastAttemptAt: 1000, now: 1000) == 0)
    }

    @Test("after a clock set back past the last failure, the whole wait runs from then, and then the right passcode works")
    func clockSetBackWaitEnds() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        try makeBag(directory, clock: clock).setPasscode(secret("right"), old: nil)
        for _ in 1...5 {
            #expect(throws: ProtectionError.self) { try makeBag(directory, clock: clock).unlock(passcode: secret("wrong")) }
        }
        // The fifth failure asks for 60 s; the clock then goes back 10 hours.
        clock.advance(bySeconds: -36_000)
        let limited = #expect(throws: ProtectionError.self) { try makeBag(directory, clock: clock).unlock(passcode: secret("right")) }
        #expect(limited?.code == .rateLimited)
        #expect(limited?.retryAfterSeconds == 60)
        clock.advance(bySeconds: 59)
        let stillLimited = #expect(throws: ProtectionError.self) { try makeBag(directory, clock: clock).unlock(passcode: secret("right")) }
        #expect(stillLimited?.retryAfterSeconds == 1)
        clock.advance(bySeconds: 1)
        let bag = try makeBag(directory, clock: clock)
        try bag.unlock(passcode: secret("right"))
        #expect(bag.failedAttempts == 0)
    }

    @Test("erase-after-N destroys every key on the Nth consecutive failure")
    func eraseAfterFailures() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        let policy = try FailedAttemptPolicy(delaysInSeconds: [0], eraseAfter: 3)
        try makeBag(directory, clock: clock, policy: policy).setPasscode(secret("right"), old: nil)
        let bag = try makeBag(directory, clock: clock, policy: policy)
        for _ in 1...2 {
            #expect((#expect(throws: ProtectionError.self) { try bag.unlock(passcode: secret("wrong")) })?.code == .wrongPasscode)
        }
        let erased = #expect(throws: ProtectionError.self) { try bag.unlock(passcode: secret("wrong")) }
        #expect(erased?.code == .erasedAfterFailedAttempts)
        let reloaded = try makeBag(directory, clock: clock, policy: policy)
        #expect(!reloaded.hasPasscode)
        #expect(reloaded.failedAttempts == 0)
    }

    @Test("changing the passcode needs the old one and then only the new one works")
    func changePasscode() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        let bag = try makeBag(directory, clock: clock)
        try bag.setPasscode(secret("one"), old: nil)
        #expect(throws: ProtectionError.self) { try bag.setPasscode(secret("two"), old: nil) }
        #expect(throws: ProtectionError.self) { try bag.setPasscode(secret("two"), old: secret("zero")) }
        try bag.setPasscode(secret("two"), old: secret("one"))
        let reloaded = try makeBag(directory, clock: clock)
        #expect(throws: ProtectionError.self) { try reloaded.unlock(passcode: secret("one")) }
        try reloaded.unlock(passcode: secret("two"))
    }

    @Test("a modified key bag, or another device secret, is refused as corrupt")
    func tamperedKeyBag() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualWallClock()
        try makeBag(directory, clock: clock).setPasscode(secret("right"), old: nil)
        let path = directory.appending("keybag")
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        // The first passcode keeps the replaced keys until a store rewraps its files.
        #expect(original.count == 620)
        for index in stride(from: 0, to: original.count, by: 7) {
            var tampered = original
            tampered[index] ^= 0x40
            try tampered.write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: ProtectionError.self) { try makeBag(directory, clock: clock) }
            #expect(error?.code == .keyBagCorrupt)
        }
        try original.write(to: URL(fileURLWithPath: path))
        try FileManager.default.removeItem(atPath: directory.appending("device-key"))
        let error = #expect(throws: ProtectionError.self) { try makeBag(directory, clock: clock) }
        #expect(error?.code == .keyBagCorrupt)
    }
}
