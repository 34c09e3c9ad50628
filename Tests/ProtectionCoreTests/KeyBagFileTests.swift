import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Synchronization
import Testing

@Suite("The key bag file is never replaced or trusted without a word")
struct KeyBagFileTests {
    private final class Notices: Sendable {
        private let list = Mutex<[StoreNotice]>([])
        var all: [StoreNotice] { list.withLock { $0 } }
        var record: @Sendable (StoreNotice) -> Void { { notice in self.list.withLock { $0.append(notice) } } }
    }

    @Test("a missing key bag beside stored files is refused with keyBagCorrupt; with no file a fresh one is made")
    func missingKeyBag() throws {
        let fixture = try StoreFixture()
        try fixture.store.write([1, 2, 3], to: fixture.name("kept"), in: fixture.namespace, protection: .none)
        fixture.store.shutdown()
        let keyBag = fixture.directory.path + "/keybag"
        try FileManager.default.removeItem(atPath: keyBag)
        do {
            _ = try ProtectedStore(configuration: fixture.configuration)
            Issue.record("a fresh key bag replaced the lost one beside stored files")
        } catch let error as ProtectionError {
            #expect(error.code == .keyBagCorrupt)
            #expect(error.message.contains("is missing") && error.message.contains("restore the key bag"))
        }
        #expect(!FileManager.default.fileExists(atPath: keyBag))

        // Once the files are moved away, as the message says, a new store starts.
        try FileManager.default.moveItem(atPath: fixture.directory.path + "/store",
                                         toPath: fixture.directory.path + "/store.lost")
        let fresh = try ProtectedStore(configuration: fixture.configuration)
        fresh.shutdown()
        #expect(FileManager.default.fileExists(atPath: keyBag))
    }

    @Test("a key bag others may read is set to 0600 with a warning")
    func looseModeIsFixed() throws {
        let fixture = try StoreFixture()
        fixture.store.shutdown()
        let keyBag = fixture.directory.path + "/keybag"
        #expect(chmod(keyBag, 0o644) == 0)
        let notices = Notices()
        let store = try ProtectedStore(configuration: fixture.configuration, notify: notices.record)
        store.shutdown()
        var info = stat()
        #expect(stat(keyBag, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(notices.all == [.keyBagModeFixed(path: keyBag, mode: 0o644)])
        #expect(notices.all.first?.isWarning == true)
    }

    @Test("a key bag owned by another user is refused", .enabled(if: geteuid() == 0, "needs root to chown"))
    func foreignOwnerIsRefused() throws {
        let fixture = try StoreFixture()
        fixture.store.shutdown()
        let keyBag = fixture.directory.path + "/keybag"
        #expect(chown(keyBag, 4242, 4242) == 0)
        do {
            _ = try ProtectedStore(configuration: fixture.configuration)
            Issue.record("a foreign key bag was trusted")
        } catch let error as ProtectionError {
            #expect(error.code == .ioFailure && error.message.contains("owned by uid 4242"))
        }
    }
}
