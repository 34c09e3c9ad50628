import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// A state directory another user could change is refused at start, with
/// the path and the fix (security review F8: a world-writable state
/// directory let another user redirect root's files through a symlink).
@Suite("State directory ownership and mode", .serialized)
struct StateDirectoryCheckTests {
    static func open(_ directory: String) throws -> ProtectedStore {
        try ProtectedStore(configuration: StoreConfiguration(stateDirectory: directory, passcodeCost: .minimum))
    }

    @Test("a state directory writable by group or others is refused, naming it and the fix",
          arguments: [0o770 as mode_t, 0o707, 0o777])
    func writableByOthers(mode: mode_t) throws {
        let parent = try TemporaryDirectory("state-mode")
        defer { parent.remove() }
        let state = parent.appending("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        chmod(state, mode)
        let error = #expect(throws: ProtectionError.self) { _ = try Self.open(state) }
        #expect(error?.message.contains(state) == true)
        #expect(error?.message.contains("chmod go-w") == true)
        chmod(state, 0o700)
        _ = try Self.open(state)
    }

    @Test("a state directory owned by another user is refused",
          .enabled(if: getuid() == 0, "needs root to give the directory away"))
    func foreignOwner() throws {
        let parent = try TemporaryDirectory("state-owner")
        defer { parent.remove() }
        let state = parent.appending("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        chmod(state, 0o700)
        chown(state, 4242, 4242)
        let error = #expect(throws: ProtectionError.self) { _ = try Self.open(state) }
        #expect(error?.message.contains("owned by uid 4242") == true)
    }

    @Test("a directory above it that others may write without the sticky bit is refused")
    func unsafeAncestor() throws {
        let parent = try TemporaryDirectory("state-above")
        defer { parent.remove() }
        chmod(parent.path, 0o777)
        let state = parent.appending("state")
        let error = #expect(throws: ProtectionError.self) { _ = try Self.open(state) }
        #expect(error?.message.contains("without the sticky bit") == true)
        chmod(parent.path, 0o1777)
        _ = try Self.open(state)
    }
}
