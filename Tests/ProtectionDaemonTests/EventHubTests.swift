import NIOCore
@testable import ProtectionDaemon
import ProtectionCore
import ProtectionWire
import Testing

@Suite("Event fan-out")
struct EventHubTests {
    private static func event(_ sequence: UInt64) -> ProtectionEvent {
        ProtectionEvent(kind: .didBecomeAvailable(firstUnlock: false), sequence: sequence, state: .unlocked)
    }

    private static func sequence(of frame: Frame?) throws -> UInt64 {
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

    @Test("a subscriber that never reads keeps only the newest events and does not hold up another")
    func silentSubscriberKeepsNewest() async throws {
        let hub = EventHub()
        let (silentID, silent) = hub.subscribe()
        let (_, reader) = hub.subscribe()
        var readerEvents = reader.makeAsyncIterator()
        var received: [UInt64] = []
        for sequence in UInt64(1)...100 {
            hub.broadcast([Self.event(sequence)])
            received.append(try Self.sequence(of: await readerEvents.next()))
        }
        #expect(received == Array(1...100))
        hub.unsubscribe(silentID)
        var kept: [UInt64] = []
        for await frame in silent { kept.append(try Self.sequence(of: frame)) }
        #expect(kept == Array(UInt64(101 - EventHub.bufferSize)...100))
    }

    @Test("after a burst, a subscriber keeps the newest events whether or not it reads, and ending the streams ends them")
    func burstKeepsNewest() async throws {
        let hub = EventHub()
        let (_, slow) = hub.subscribe()
        let (fastID, fast) = hub.subscribe()
        let events = (1...UInt64(EventHub.bufferSize * 3)).map {
            ProtectionEvent(kind: .didBecomeUnavailable, sequence: $0, state: .locked)
        }
        hub.broadcast(events)
        hub.unsubscribe(fastID)
        var fastCount = 0
        for await _ in fast { fastCount += 1 }
        #expect(fastCount == EventHub.bufferSize)
        hub.finishAll()
        var sequences: [UInt64] = []
        for await frame in slow { sequences.append(try Self.sequence(of: frame)) }
        #expect(sequences.count == EventHub.bufferSize)
        #expect(sequences.last == UInt64(EventHub.bufferSize * 3))
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
}
