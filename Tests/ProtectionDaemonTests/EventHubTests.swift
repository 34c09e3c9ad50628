import NIOCore
@testable import ProtectionDaemon
import ProtectionCore
import ProtectionWire
import Testing

@Suite("Event fan-out")
struct EventHubTests {
    static func event(_ sequence: UInt64) -> ProtectionEvent {
        ProtectionEvent(kind: .didBecomeAvailable(firstUnlock: false), sequence: sequence, state: .unlocked)
    }

    static func sequence(of frame: Frame?) throws -> UInt64 {
        guard case .event(let event) = try Response(frame: try #require(frame)) else {
            Issue.record("not an event frame")
            return 0
        }
        return event.sequence
    }

    @Test("every subscriber gets the event as one frame, encoded once and shared")
    func frameIsEncodedOnce() async throws {
        let hub = EventHub()
        let (_, first) = hub.subscribe()
        let (_, second) = hub.subscribe()
        hub.broadcast([Self.event(7)])
        var firstEvents = first.makeAsyncIterator()
        var secondEvents = second.makeAsyncIterator()
        let a = try #require(await firstEvents.next())
        let b = try #require(await secondEvents.next())
        #expect(a == Response.event(WireEvent(Self.event(7))).frame(requestID: 0))
        #expect(a == b)
        let aBytes = a.body.withUnsafeReadableBytes { $0.baseAddress }
        let bBytes = b.body.withUnsafeReadableBytes { $0.baseAddress }
        #expect(aBytes == bBytes, "each subscriber got its own copy of the bytes")
    }

    @Test("events broadcast together arrive in order")
    func eventsKeepTheirOrder() async throws {
        let hub = EventHub()
        let (_, stream) = hub.subscribe()
        hub.broadcast([Self.event(1), Self.event(2), Self.event(3)])
        var events = stream.makeAsyncIterator()
        var received: [UInt64] = []
        for _ in 0..<3 { received.append(try Self.sequence(of: await events.next())) }
        #expect(received == [1, 2, 3])
    }

    @Test("an unsubscribed subscriber gets nothing more and no longer counts for a lock")
    func unsubscribeStopsDelivery() async throws {
        let hub = EventHub()
        let (gone, goneStream) = hub.subscribe()
        let (staying, stayingStream) = hub.subscribe()
        hub.broadcast([Self.event(1)])
        hub.unsubscribe(gone)
        hub.broadcast([Self.event(2)])
        #expect(hub.subscriberIDs == [staying])
        var goneEvents = goneStream.makeAsyncIterator()
        var stayingEvents = stayingStream.makeAsyncIterator()
        #expect(try Self.sequence(of: await goneEvents.next()) == 1)
        #expect(try Self.sequence(of: await stayingEvents.next()) == 1)
        #expect(try Self.sequence(of: await stayingEvents.next()) == 2)
        hub.broadcast([Self.event(3)])
        #expect(try Self.sequence(of: await stayingEvents.next()) == 3)
        // The gone subscriber's stream got nothing after 1 (its next would be 3).
        hub.finishAll()
        #expect(hub.subscriberIDs.isEmpty)
    }
}
