import Foundation
import Glibc
import NIOCore
import ProtectionTestSupport
import ProtectionWire

/// Subscribers that speak protd's protocol by hand, without the client
/// library: hello, subscribe, then one poll(2) loop that notes each
/// will-become-unavailable event and acknowledges it, and notes each
/// did-become-available one. Measured against
/// the library's subscribers, they separate protd's share of the fan-out
/// from the client library's.
enum WireSubscribers {
    /// Connects and subscribes `count` connections to protd at
    /// `socketPath`, says `ready`, and serves them until the process exits.
    static func serve(socketPath: String, count: Int, log: DeliveryLog) throws -> Never {
        var connections: [RawConnection] = []
        for _ in 0..<count {
            let connection = try RawConnection(path: socketPath)
            try connection.handshake()
            try connection.send(type: MessageType.subscribe.rawValue, id: 2, body: [])
            guard try connection.readFrame()?.type == MessageType.subscribed.rawValue else {
                throw POSIXError(.EPROTO)
            }
            connections.append(connection)
        }
        DeliveryLog.emit("ready")
        var nextID: UInt32 = 3
        try PollLoop.run(connections.map(\.fd)) { index in
            // Frames are small and written whole, so a readable socket holds at least one.
            guard let frame = try connections[index].readFrame() else { return false }
            guard frame.type == MessageType.event.rawValue,
                  case .event(let event) = try Response(frame: Frame(type: frame.type, requestID: frame.id,
                                                                     body: ByteBuffer(bytes: frame.body)))
            else { return true }
            let receivedAt = ContinuousClock.now
            if event.kind == .didBecomeAvailable { log.record(.available, sequence: event.sequence, receivedAt: receivedAt) }
            guard event.kind == .willBecomeUnavailable else { return true }
            var acknowledgement = ByteBuffer()
            Request.acknowledge(sequence: event.sequence).frame(requestID: nextID).encode(into: &acknowledgement)
            nextID &+= 1
            try connections[index].sendRaw(Array(acknowledgement.readableBytesView))
            log.record(sequence: event.sequence, receivedAt: receivedAt)
            return true
        }
    }
}
