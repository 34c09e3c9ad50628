import Foundation
import ProtectionCore
import ProtectionTestSupport
import Sodium
import Synchronization
import Testing

/// Moving a store from the state directory's `device-key` file to the
/// systemd credential (and back), with every class holding a file.
@Suite("Device secret migration: file to credential and back, passcode and files kept")
struct DeviceSecretMigrationTests {
    /// A state directory with a separate credential directory.
    private struct Setup {
        let directory: TemporaryDirectory
        let clock = ManualWallClock()
        let notices = Notices()
        var stateDirectory: String { directory.appending("state") }
        var formerFile: String { stateDirectory + "/device-key" }
        var credential: String { directory.appending("credentials/device-key") }
        let namespace = Namespace(uid: 1000)

        init() throws {
            directory = try TemporaryDirectory("migration")
            try FileManager.default.createDirectory(atPath: directory.appending("credentials"),
                                                    withIntermediateDirectories: true)
            let bytes = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
            #expect(FileManager.default.createFile(atPath: credential, contents: bytes))
        }

        /// A store under the file secret alone (as before the credential).
        func openWithFile() throws -> ProtectedStore {
            try ProtectedStore(configuration: StoreConfiguration(stateDirectory: stateDirectory, passcodeCost: .minimum),
                               clock: clock, notify: notices.record)
        }

        /// A store under the credential that may migrate from `former`.
        func openWithCredential(former: DeviceSecret.Source?) throws -> ProtectedStore {
            try ProtectedStore(configuration: StoreConfiguration(
                stateDirectory: stateDirectory, deviceSecret: .credential(path: credential),
                formerDeviceSecret: former, passcodeCost: .minimum), clock: clock, notify: notices.record)
        }

        /// One file in every class.
        func writeEveryClass(_ store: ProtectedStore) throws {
            for protection in ProtectionClass.allCases {
                try store.write(Array("\(protection)".utf8), to: try FileName("\(protection)"), in: namespace,
                                protection: protection)
            }
        }

        /// Every class's file reads back what `writeEveryClass` wrote.
        func expectEveryClass(_ store: ProtectedStore) throws {
            for protection in ProtectionClass.allCases {
                #expect(try store.read(try FileName("\(protection)"), in: namespace) == Array("\(protection)".utf8))
            }
        }
    }

    /// What the store reported, in order.
    final class Notices: Sendable {
        private let list = Mutex<[StoreNotice]>([])
        var all: [StoreNotice] { list.withLock { $0 } }
        var record: @Sendable (StoreNotice) -> Void { { notice in self.list.withLock { $0.append(notice) } } }
        func removeAll() { list.withLock { $0.removeAll() } }
    }

    private func secret(_ text: String) -> SecretBytes { StoreFixture.secret(text) }

    @Test("without a passcode the key bag moves to the credential at start and the former file is removed")
    func withoutPasscodeMigratesAtStart() throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let before = try setup.openWithFile()
        try setup.writeEveryClass(before)
        before.shutdown()

        let migrated = try setup.openWithCredential(former: .file(path: setup.formerFile))
        try setup.expectEveryClass(migrated)
        migrated.shutdown()
        #expect(!FileManager.default.fileExists(atPath: setup.formerFile))
        #expect(setup.notices.all.contains(.migrated(former: setup.formerFile)))

        // The credential alone opens it now.
        let after = try setup.openWithCredential(former: nil)
        try setup.expectEveryClass(after)
        after.shutdown()
    }

    @Test("with a passcode the key bag waits for the next unlock, then moves; the passcode and files are kept")
    func withPasscodeMigratesAtUnlock() throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let before = try setup.openWithFile()
        try setup.writeEveryClass(before)
        try before.setPasscode(secret("passcode"), old: nil)
        before.shutdown()
        setup.notices.removeAll()

        let pending = try setup.openWithCredential(former: .file(path: setup.formerFile))
        #expect(pending.lockState == .beforeFirstUnlock)
        #expect(setup.notices.all == [.pendingUntilUnlock(former: setup.formerFile)])
        #expect(setup.notices.all.allSatisfy { $0.isWarning }, "a device secret file beside the credential is a warning")
        #expect(FileManager.default.fileExists(atPath: setup.formerFile))
        #expect(throws: ProtectionError.self) { _ = try pending.unlock(passcode: secret("wrong")) }
        #expect(FileManager.default.fileExists(atPath: setup.formerFile), "a wrong passcode migrates nothing")
        _ = try pending.unlock(passcode: secret("passcode"))
        try setup.expectEveryClass(pending)
        pending.shutdown()
        #expect(!FileManager.default.fileExists(atPath: setup.formerFile))
        #expect(setup.notices.all.contains(.migrated(former: setup.formerFile)))

        let after = try setup.openWithCredential(former: nil)
        #expect(throws: ProtectionError.self) { _ = try after.unlock(passcode: secret("passcode-not")) }
        _ = try after.unlock(passcode: secret("passcode"))
        try setup.expectEveryClass(after)
        after.shutdown()
    }

    @Test("a former file left by a crash after the rewrap is removed at the next start")
    func leftoverFormerFileIsRemoved() throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        try setup.openWithFile().shutdown()
        let saved = try Data(contentsOf: URL(fileURLWithPath: setup.formerFile))
        try setup.openWithCredential(former: .file(path: setup.formerFile)).shutdown()
        // As if the process died between the key bag write and the unlink.
        #expect(FileManager.default.createFile(atPath: setup.formerFile, contents: saved,
                                               attributes: [.posixPermissions: 0o600]))
        let store = try setup.openWithCredential(former: .file(path: setup.formerFile))
        store.shutdown()
        #expect(!FileManager.default.fileExists(atPath: setup.formerFile))
        #expect(setup.notices.all.last == .destroyedFormer(setup.formerFile))
    }

    @Test("a key bag that neither the credential nor a former secret opens fails authentication")
    func neitherSecretOpens() throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        try setup.openWithFile().shutdown()
        try FileManager.default.removeItem(atPath: setup.formerFile)
        let error = #expect(throws: ProtectionError.self) {
            try setup.openWithCredential(former: .file(path: setup.formerFile))
        }
        #expect(error?.code == .keyBagCorrupt)
        #expect(error?.message.contains("device secret") == true)
    }

    @Test("back from the credential to a file: the key bag moves and the credential is left alone")
    func credentialToFile() throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let before = try setup.openWithCredential(former: nil)
        try setup.writeEveryClass(before)
        before.shutdown()
        let newFile = setup.directory.appending("new-device-key")
        let after = try ProtectedStore(configuration: StoreConfiguration(
            stateDirectory: setup.stateDirectory, deviceSecret: .file(path: newFile),
            formerDeviceSecret: .credential(path: setup.credential), passcodeCost: .minimum), clock: setup.clock)
        try setup.expectEveryClass(after)
        after.shutdown()
        #expect(FileManager.default.fileExists(atPath: setup.credential))
        let fileOnly = try ProtectedStore(configuration: StoreConfiguration(
            stateDirectory: setup.stateDirectory, deviceSecret: .file(path: newFile), passcodeCost: .minimum),
            clock: setup.clock)
        try setup.expectEveryClass(fileOnly)
        fileOnly.shutdown()
    }
}
