@testable import ProtectionDaemon
import ProtectionCore
import ProtectionWire
import Testing

@Suite("Connection slots in total and per uid")
struct ConnectionSlotsTests {
    let limits = ClientLimits(connections: 4, connectionsPerUID: 2, filesPerConnection: 1, filesPerUID: 1,
                              subscribersPerUID: 1)

    @Test("a uid gets its share of ordinary slots, and the refusal names limits.max-connections-per-uid")
    func shareOfOneUID() throws {
        var slots = ConnectionSlots(limits: limits)
        #expect(try slots.admit(uid: 4242, isAdmin: false).get() == .ordinary)
        #expect(try slots.admit(uid: 4242, isAdmin: false).get() == .ordinary)
        let refusal = try #require(slots.admit(uid: 4242, isAdmin: false).failure)
        #expect(refusal.code == .tooManyConnections)
        #expect(refusal.message.contains("limits.max-connections-per-uid"))
        #expect(try slots.admit(uid: 4243, isAdmin: false).get() == .ordinary)
    }

    @Test("with every ordinary slot taken, ordinary uids are refused naming limits.max-connections and administrators get the kept slots")
    func keptSlotsForAdministrators() throws {
        var slots = ConnectionSlots(limits: limits)
        for uid: UInt32 in [1, 1, 2, 2] { _ = try slots.admit(uid: uid, isAdmin: false).get() }
        let refusal = try #require(slots.admit(uid: 3, isAdmin: false).failure)
        #expect(refusal.message.contains("limits.max-connections allows"))
        for _ in 0..<ClientLimits.connectionsKeptForAdmins {
            #expect(try slots.admit(uid: 0, isAdmin: true).get() == .kept)
        }
        #expect(slots.admit(uid: 0, isAdmin: true).failure?.code == .tooManyConnections)
        slots.release(.kept, uid: 0)
        #expect(try slots.admit(uid: 0, isAdmin: true).get() == .kept)
    }

    @Test("an administrator past its own share gets a kept slot; given back, an ordinary slot is ordinary again")
    func administratorPastItsShare() throws {
        var slots = ConnectionSlots(limits: limits)
        #expect(try slots.admit(uid: 0, isAdmin: true).get() == .ordinary)
        #expect(try slots.admit(uid: 0, isAdmin: true).get() == .ordinary)
        #expect(try slots.admit(uid: 0, isAdmin: true).get() == .kept)
        slots.release(.ordinary, uid: 0)
        #expect(try slots.admit(uid: 0, isAdmin: true).get() == .ordinary)
        #expect(slots.ordinary == 2 && slots.kept == 1)
    }

    @Test("a kept slot serves administration only")
    func keptSlotServesAdministration() {
        #expect(ConnectionSlots.servesOnKeptSlot(.status))
        #expect(ConnectionSlots.servesOnKeptSlot(.lock(graceMilliseconds: nil, waitUntilLocked: true, reason: .requested)))
        #expect(ConnectionSlots.servesOnKeptSlot(.unlock(passcode: [1])))
        #expect(!ConnectionSlots.servesOnKeptSlot(.list(prefix: "")))
        #expect(!ConnectionSlots.servesOnKeptSlot(.subscribe))
    }

    @Test("handles and subscriptions of one uid are limited, named by their keys, and given back")
    func holdingsPerUID() throws {
        let holdings = UIDHoldings(limits: limits)
        try holdings.take(.file, for: 7)
        try holdings.take(.file, for: 8)
        #expect(throws: WireError.self) { try holdings.take(.file, for: 7) }
        do {
            try holdings.take(.subscription, for: 7)
            try holdings.take(.subscription, for: 7)
            Issue.record("a second subscription was counted")
        } catch let error as WireError {
            #expect(error.code == .tooManyHandles && error.message.contains("limits.max-subscribers-per-uid"))
        }
        holdings.give(.file, for: 7)
        try holdings.take(.file, for: 7)
    }
}

extension Result {
    /// The error, or nil on success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
