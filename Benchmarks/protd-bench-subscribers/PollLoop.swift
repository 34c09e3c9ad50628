import Foundation
import Glibc

/// The one poll(2) loop the hand-made subscribers run over their sockets.
enum PollLoop {
    /// Calls `serve` with the index of every readable descriptor in `fds`,
    /// forever; a descriptor for which `serve` returns false (its peer
    /// closed it) is no longer watched.
    static func run(_ fds: [Int32], serve: (Int) throws -> Bool) throws -> Never {
        var watched = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while true {
            let found = watched.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), -1) }
            guard found >= 0 || errno == EINTR else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            for index in watched.indices where watched[index].revents != 0 {
                if try !serve(index) { watched[index].fd = -1 }
            }
        }
    }
}
