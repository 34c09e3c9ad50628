import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Synchronization
import Testing

@Suite("Leftover temporary files, erase clean-up, races with erase")
struct StoreMaintenanceTests {
    private static let hex = String(repeating: "0123456789abcdef", count: 2)

    private func plantFile(_ path: String) {
        #expect(FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])), "could not create \(path)")
    }

    private func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    @Test("a second store on the same state directory is refused until the first shuts down")
    func oneStorePerDirectory() throws {
        let fixture = try StoreFixture()
        try fixture.store.write([1], to: fixture.name("kept"), in: fixture.namespace, protection: .none)
        do {
            _ = try ProtectedStore(configuration: fixture.configuration)
            Issue.record("a second store opened a directory in use")
        } catch let error as ProtectionError {
            #expect(error.message.contains("another protd is already using the state directory"))
        }
        #expect(try fixture.store.read(fixture.name("kept"), in: fixture.namespace) == [1])
        try fixture.restart()
        #expect(try fixture.store.read(fixture.name("kept"), in: fixture.namespace) == [1])
    }

    @Test("a restart removes the temporary files of interrupted writes, and nothing else")
    func restartSweepsTemporaryFiles() throws {
        let fixture = try StoreFixture()
        try fixture.store.write([1], to: fixture.name("kept"), in: fixture.namespace, protection: .none)
        try fixture.store.write([2], to: fixture.name("other-user"), in: Namespace(uid: 1001), protection: .none)
        let state = fixture.directory.path
        let scratch = try fixture.scratchDirectory()
        let outside = try TemporaryDirectory("outside")
        defer { outside.remove() }
        plantFile(outside.appending("tmp-" + Self.hex))
        plantFile(outside.appending("target"))

        let removed = [
            scratch + "/tmp-" + Self.hex,
            try fixture.scratchDirectory(uid: 1001) + "/tmp-" + String(Self.hex.reversed()),
            state + "/tmp-" + Self.hex,                 // key bag
            state + "/device-key.tmp-" + Self.hex,      // device secret
        ]
        removed.forEach(plantFile)
        let kept = [
            scratch + "/tmp-" + Self.hex.uppercased(),
            scratch + "/tmp-" + Self.hex + "0",
            scratch + "/tmp-" + String(Self.hex.dropLast()),
            scratch + "/notes",
            state + "/keybag.tmp-" + Self.hex,
            try fixture.filesDirectory() + "/tmp-" + Self.hex,  // a name a client might choose
        ]
        kept.forEach(plantFile)
        // Never followed or removed: a symlink with a temporary name, a
        // directory with one, a namespace whose scratch directory is a link.
        try FileManager.default.createSymbolicLink(atPath: scratch + "/tmp-" + String(repeating: "a", count: 32),
                                                   withDestinationPath: outside.appending("target"))
        try FileManager.default.createDirectory(atPath: scratch + "/tmp-" + String(repeating: "b", count: 32),
                                                withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: state + "/store/1002", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: state + "/store/1002/tmp", withDestinationPath: outside.path)

        try fixture.restart()

        for path in removed { #expect(!exists(path), "\(path) was left") }
        for path in kept { #expect(exists(path), "\(path) was removed") }
        #expect(exists(scratch + "/tmp-" + String(repeating: "a", count: 32)))
        #expect(exists(outside.appending("target")))
        #expect(exists(outside.appending("tmp-" + Self.hex)))
        #expect(exists(scratch + "/tmp-" + String(repeating: "b", count: 32)))
        #expect(try fixture.store.read(fixture.name("kept"), in: fixture.namespace) == [1])
        #expect(try fixture.store.read(fixture.name("other-user"), in: Namespace(uid: 1001)) == [2])
    }

    @Test("erase removes key bag temporary files next to the device secret it keeps")
    func eraseRemovesKeyBagTemporaryFiles() throws {
        let fixture = try StoreFixture()
        let state = fixture.directory.path
        let leftover = state + "/tmp-" + Self.hex
        plantFile(leftover)
        _ = try fixture.store.erase()
        #expect(!exists(leftover))
        #expect(exists(state + "/device-key"))
        #expect(exists(state + "/keybag"))
    }

    @Test("an erase whose file removal fails still hands over its event")
    func failedRemovalKeepsTheEvent() throws {
        let fixture = try StoreFixture()
        try fixture.setPasscodeAndRestart()
        _ = try fixture.store.unlock(passcode: StoreFixture.secret("correct horse"))
        _ = try fixture.store.requestLock(grace: .zero)
        #expect(fixture.store.lockState == .locked)
        try fixture.store.write([1], to: fixture.name("x"), in: fixture.namespace, protection: .none)
        // A tree deeper than PATH_MAX: removing it by path fails.
        let files = try fixture.filesDirectory()
        try Self.makeDeepTree(in: files)
        defer { Self.removeDeepTree(in: files) }

        #expect(throws: ProtectionError.self) { try fixture.store.erase() }
        let events = fixture.store.takeUndeliveredEvents()
        #expect(events.count == 1)
        #expect(fixture.store.lockState == .unlocked)
        #expect(!fixture.store.status.passcodeSet)
    }

    @Test("creating files while erasing fails only with typed errors")
    func createRacingErase() throws {
        let fixture = try StoreFixture()
        let store = fixture.store, namespace = fixture.namespace
        let stop = Atomic(false)
        let eraserDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { eraserDone.signal() }
            while !stop.load(ordering: .relaxed) { _ = try? store.erase() }
        }
        var untyped: [String] = []
        var internalErrors: [String] = []
        for index in 0..<300 {
            do {
                let classes: [ProtectionClass] = [.none, .complete, .completeUntilFirstUserAuthentication]
                let handle = try store.open(try FileName("f\(index)"), in: namespace,
                                            mode: .createNew(classes[index % classes.count]))
                handle.close()
            } catch let error as ProtectionError {
                if error.code == .ioFailure { internalErrors.append(error.message) }
            } catch {
                untyped.append("\(error)")
            }
        }
        stop.store(true, ordering: .relaxed)
        eraserDone.wait()
        #expect(untyped.isEmpty, "\(untyped.count) untyped errors: \(untyped.first ?? "")")
        #expect(internalErrors.isEmpty, "\(internalErrors.count) I/O errors: \(internalErrors.first ?? "")")
    }

    private static let deepName = String(repeating: "d", count: 250)

    /// Twenty nested directories of 250-character names under `parent`.
    private static func makeDeepTree(in parent: String) throws {
        var fd = open(parent, O_RDONLY | O_DIRECTORY)
        #expect(fd >= 0)
        for _ in 0..<20 {
            #expect(mkdirat(fd, deepName, 0o700) == 0)
            let next = openat(fd, deepName, O_RDONLY | O_DIRECTORY)
            close(fd)
            fd = next
            #expect(fd >= 0)
        }
        close(fd)
    }

    /// Removes what `makeDeepTree` made, through descriptors.
    private static func removeDeepTree(in parent: String) {
        var fds: [Int32] = [open(parent, O_RDONLY | O_DIRECTORY)]
        while fds.count <= 20, fds.last! >= 0 {
            let next = openat(fds.last!, deepName, O_RDONLY | O_DIRECTORY)
            if next < 0 { break }
            fds.append(next)
        }
        for depth in stride(from: fds.count - 1, to: 0, by: -1) {
            close(fds[depth])
            unlinkat(fds[depth - 1], deepName, AT_REMOVEDIR)
        }
        close(fds[0])
    }
}
