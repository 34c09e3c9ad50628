internal import NIOCore
internal import Synchronization

/// The open client channels, so shutdown can close them all and the
/// connection limit can be enforced.
final class ConnectionRegistry: Sendable {
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])

    /// Adds a channel; false when `limit` channels are already open.
    func add(_ channel: any Channel, limit: Int) -> Bool {
        channels.withLock { channels in
            guard channels.count < limit else { return false }
            channels[ObjectIdentifier(channel)] = channel
            return true
        }
    }

    /// Forgets a channel.
    func remove(_ channel: any Channel) {
        _ = channels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Closes every open channel.
    func closeAll() {
        for channel in channels.withLock({ Array($0.values) }) {
            channel.close(promise: nil)
        }
    }
}
