import Foundation
import Glibc
import ProtectionTestSupport

/// Subscribers for protd-bench's fan-out floor: plain Unix-socket
/// connections to protd-bench itself, served by one poll(2) loop, with no
/// client library and no protd. Each reads an 8-byte sequence number, notes
/// when, and writes it back as its acknowledgement.
enum PlainSocketSubscribers {
    /// Bytes of one notification and of one acknowledgement.
    static let messageBytes = 8

    /// Connects `count` sockets to `socketPath`, says `ready`, and serves
    /// them until the process exits.
    static func serve(socketPath: String, count: Int, log: DeliveryLog) throws -> Never {
        var watched: [pollfd] = []
        for _ in 0..<count {
            guard let fd = unixSocket(type: Int32(SOCK_STREAM.rawValue), path: socketPath, connect) else {
                throw POSIXError(.init(rawValue: errno) ?? .ECONNREFUSED)
            }
            watched.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
        }
        DeliveryLog.emit("ready")
        while true {
            let found = watched.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), -1) }
            guard found >= 0 || errno == EINTR else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            for index in watched.indices where watched[index].revents != 0 {
                let fd = watched[index].fd
                var sequence: UInt64 = 0
                guard read(fd, &sequence, messageBytes) == messageBytes else {
                    // protd-bench closed it (or broke it): stop watching.
                    close(fd)
                    watched[index].fd = -1
                    continue
                }
                let receivedAt = ContinuousClock.now
                _ = write(fd, &sequence, messageBytes)
                log.record(sequence: sequence, receivedAt: receivedAt)
            }
        }
    }
}
