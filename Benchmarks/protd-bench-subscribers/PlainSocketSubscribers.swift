import Foundation
import Glibc
import ProtectionTestSupport

/// Subscribers for protd-bench's fan-out floor: plain Unix-socket
/// connections to protd-bench itself, served by one `PollLoop`, with no
/// client library and no protd. Each reads an 8-byte sequence number, notes
/// when, and writes it back as its acknowledgement.
enum PlainSocketSubscribers {
    /// Bytes of one notification and of one acknowledgement.
    static let messageBytes = 8

    /// Connects `count` sockets to `socketPath`, says `ready`, and serves
    /// them until the process exits.
    static func serve(socketPath: String, count: Int, log: DeliveryLog) throws -> Never {
        var sockets: [Int32] = []
        for _ in 0..<count {
            guard let fd = unixSocket(type: Int32(SOCK_STREAM.rawValue), path: socketPath, connect) else {
                throw POSIXError(.init(rawValue: errno) ?? .ECONNREFUSED)
            }
            sockets.append(fd)
        }
        DeliveryLog.emit("ready")
        try PollLoop.run(sockets) { index in
            var sequence: UInt64 = 0
            guard read(sockets[index], &sequence, messageBytes) == messageBytes else {
                // protd-bench closed it (or broke it): stop watching.
                close(sockets[index])
                return false
            }
            let receivedAt = ContinuousClock.now
            _ = write(sockets[index], &sequence, messageBytes)
            log.record(sequence: sequence, receivedAt: receivedAt)
            return true
        }
    }
}
