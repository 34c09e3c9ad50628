import ProtectionCore
import ProtectionTestSupport
import Testing

/// PROTECTION-MODEL.md section 2, checked cell by cell: R (read/write an
/// existing file), N (create a new file), O (a handle opened while unlocked
/// keeps working).
@Suite("The protection truth table across lock states")
struct TruthTableTests {
    enum Phase: String, CaseIterable, CustomStringConvertible {
        case beforeFirstUnlock, unlocked, locking, locked, afterRestart, afterFirstUnlockTimeout
        var description: String { rawValue }
    }

    /// What the model allows, per phase: R, N, O.
    static func expected(_ protection: ProtectionClass, _ phase: Phase) -> (read: Bool, create: Bool, openHandle: Bool) {
        let unavailableState = phase == .beforeFirstUnlock || phase == .afterRestart || phase == .afterFirstUnlockTimeout
        switch protection {
        case .none: return (true, true, true)
        case .completeUntilFirstUserAuthentication:
            return unavailableState ? (false, false, false) : (true, true, true)
        case .completeUnlessOpen:
            switch phase {
            case .beforeFirstUnlock, .afterRestart: return (false, true, false)
            case .unlocked, .locking: return (true, true, true)
            // Handles opened earlier hold their file key, as after a lock.
            case .locked, .afterFirstUnlockTimeout: return (false, true, true)
            }
        case .complete:
            return phase == .unlocked || phase == .locking ? (true, true, true) : (false, false, false)
        }
    }

    private static let passcode = "1234-abcd"
    private static let firstUnlockTimeout = Duration.seconds(72 * 3600)

    /// A store with a passcode holding one file per class, written while unlocked.
    private func preparedStore() throws -> StoreFixture {
        let fixture = try StoreFixture(segmentSize: 1024, firstUnlockTimeout: Self.firstUnlockTimeout)
        try fixture.setPasscodeAndRestart(Self.passcode)
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(Self.passcode))
        for protection in ProtectionClass.allCases {
            try fixture.store.write(Array("content of \(protection)".utf8), to: fixture.name("existing-\(protection)"),
                                    in: fixture.namespace, protection: protection)
        }
        return fixture
    }

    /// Moves the prepared (unlocked) store to `phase`; `handles` are opened
    /// before the transition, as the O column needs.
    private func move(_ fixture: StoreFixture, to phase: Phase, t0: ContinuousClock.Instant) throws {
        switch phase {
        case .unlocked: break
        case .beforeFirstUnlock:
            // A fresh start with a passcode set.
            try fixture.restart()
        case .locking:
            let progress = try fixture.store.requestLock(grace: .seconds(10), now: t0, subscribers: [SubscriberID(1)])
            #expect(progress.pendingDeadline == t0 + .seconds(10))
        case .locked:
            _ = try fixture.store.requestLock(grace: .seconds(10), now: t0, subscribers: [SubscriberID(1)])
            _ = fixture.store.deadlinePassed(now: t0 + .seconds(10))
        case .afterRestart:
            _ = try fixture.store.requestLock(grace: .zero, now: t0)
            try fixture.restart()
        case .afterFirstUnlockTimeout:
            // The unlock was at the boot clock's now: the timeout has passed later.
            let progress = fixture.store.firstUnlockTimeoutPassed(at: .now + Self.firstUnlockTimeout, grace: .zero, now: t0)
            #expect(progress.events.map(\.reason) == [.inactivity, .inactivity])
        }
        let expectedState: LockState = switch phase {
        case .beforeFirstUnlock, .afterRestart, .afterFirstUnlockTimeout: .beforeFirstUnlock
        case .unlocked: .unlocked
        case .locking: .locking
        case .locked: .locked
        }
        #expect(fixture.store.lockState == expectedState)
    }

    private func outcome(_ body: () throws -> Void) -> Bool? {
        do {
            try body()
            return true
        } catch let error as ProtectionError where error.code == .protectedDataUnavailable {
            return false
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test("create, read, write and open follow the model", arguments: ProtectionClass.allCases, Phase.allCases)
    func cell(protection: ProtectionClass, phase: Phase) throws {
        let fixture = try preparedStore()
        let store = fixture.store
        let ns = fixture.namespace
        let existing = fixture.name("existing-\(protection)")
        let handle = try store.open(existing, in: ns, mode: .existing)
        try move(fixture, to: phase, t0: .now)
        let expected = Self.expected(protection, phase)
        let current = fixture.store

        // R: read whole, read a range, reopen and write in place.
        var content: [UInt8] = []
        #expect(outcome { content = try current.read(existing, in: ns) } == expected.read)
        if expected.read { #expect(content == Array("content of \(protection)".utf8)) }
        #expect(outcome { _ = try current.read(existing, in: ns, offset: 2, count: 3) } == expected.read)
        #expect(outcome {
            let reopened = try current.open(existing, in: ns, mode: .existing)
            try reopened.write(Array("C".utf8), at: 0)
            reopened.close()
        } == expected.read)

        // N: a new file by whole-file write and by handle.
        #expect(outcome { try current.write([1, 2, 3], to: fixture.name("new-\(protection)"), in: ns, protection: protection) }
                == expected.create)
        #expect(outcome {
            let created = try current.open(fixture.name("new-handle-\(protection)"), in: ns, mode: .createNew(protection))
            try created.append([9, 9])
            created.close()
        } == expected.create)

        // O: the handle opened while unlocked (gone after a restart, as with a reboot).
        if phase != .beforeFirstUnlock && phase != .afterRestart {
            var readBack: [UInt8] = []
            #expect(outcome {
                try handle.write(Array("XY".utf8), at: 0)
                readBack = try handle.read(offset: 0, count: 2)
            } == expected.openHandle)
            if expected.openHandle { #expect(readBack == Array("XY".utf8)) }
        }
        handle.close()

        // list, stat and delete work in every state.
        #expect(try current.list(in: ns).count >= 4)
        #expect(try current.attributes(of: existing, in: ns).protection == protection)
        try current.delete(existing, in: ns)
        #expect((#expect(throws: ProtectionError.self) { try current.read(existing, in: ns) })?.code == .notFound)
    }

    @Test("a class B file created while locked is readable after the next unlock")
    func classBCreatedWhileLocked() throws {
        let fixture = try preparedStore()
        _ = try fixture.store.requestLock(grace: .zero)
        let name = fixture.name("made-while-locked")
        let handle = try fixture.store.open(name, in: fixture.namespace, mode: .createNew(.completeUnlessOpen))
        try handle.append(Array("first".utf8))
        #expect(try handle.read(offset: 0, count: 5) == Array("first".utf8))
        handle.close()
        try fixture.store.write(Array("whole".utf8), to: fixture.name("whole-while-locked"), in: fixture.namespace,
                                protection: .completeUnlessOpen)
        #expect((#expect(throws: ProtectionError.self) { try fixture.store.read(name, in: fixture.namespace) })?.code
                == .protectedDataUnavailable)
        _ = try fixture.store.unlock(passcode: StoreFixture.secret(Self.passcode))
        #expect(try fixture.store.read(name, in: fixture.namespace) == Array("first".utf8))
        #expect(try fixture.store.read(fixture.name("whole-while-locked"), in: fixture.namespace) == Array("whole".utf8))
    }

    @Test("a class A handle is invalidated exactly when the lock completes, not during the grace period")
    func classAHandleInvalidatedAtCompletion() throws {
        let fixture = try preparedStore()
        let t0 = ContinuousClock.now
        let handle = try fixture.store.open(fixture.name("existing-complete"), in: fixture.namespace, mode: .existing)
        let lock = try fixture.store.requestLock(grace: .seconds(10), now: t0, subscribers: [SubscriberID(7)])
        #expect(try handle.size() > 0)
        let progress = fixture.store.acknowledge(SubscriberID(7), sequence: try #require(lock.events.last).sequence)
        #expect(progress.events.map(\.kind) == [.didBecomeUnavailable])
        let error = #expect(throws: ProtectionError.self) { try handle.read(offset: 0, count: 1) }
        #expect(error?.code == .protectedDataUnavailable)
        #expect(!handle.isOpen)
    }

    @Test("with no passcode every class behaves as none and lock is refused")
    func noPasscode() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        #expect(fixture.store.lockState == .unlocked)
        for protection in ProtectionClass.allCases {
            try fixture.store.write([1], to: fixture.name("f-\(protection)"), in: fixture.namespace, protection: protection)
        }
        try fixture.restart()
        for protection in ProtectionClass.allCases {
            #expect(try fixture.store.read(fixture.name("f-\(protection)"), in: fixture.namespace) == [1])
        }
        let error = #expect(throws: ProtectionError.self) { try fixture.store.requestLock(grace: .zero) }
        #expect(error?.code == .noPasscodeSet)
    }

    @Test("namespaces are separate: one uid cannot see another's files")
    func namespacesAreSeparate() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let other = Namespace(uid: 2000)
        try fixture.store.write([1], to: fixture.name("mine"), in: fixture.namespace)
        #expect(try fixture.store.list(in: other).isEmpty)
        #expect((#expect(throws: ProtectionError.self) { try fixture.store.read(fixture.name("mine"), in: other) })?.code == .notFound)
        #expect((#expect(throws: ProtectionError.self) { try fixture.store.delete(fixture.name("mine"), in: other) })?.code == .notFound)
    }
}
