internal import NIOCore
internal import Synchronization

/// The open client channels, so shutdown can close them all and the
/// connection limit can be enforced; and the few refused ones still
/// waiting to close (see `holdRefused`).
final class ConnectionRegistry: Sendable {
    /// Refused connections kept open at once until their client's first
    /// frame; beyond that they are closed at once.
    static let maximumRefusedWaiting = 16

    /// Whether a new channel may be served.
    enum Admission {
        case admitted
        /// `limit` channels are already open.
        case full
        /// Shutdown has begun: nothing new is served.
        case closing
    }

    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var refused: [ObjectIdentifier: any Channel] = [:]
        var closing = false
    }

    private let state = Mutex(State())

    /// Adds a channel unless the registry is full or closing.
    func add(_ channel: any Channel, limit: Int) -> Admission {
        state.withLock { state in
            if state.closing { return .closing }
            guard state.channels.count < limit else { return .full }
            state.channels[ObjectIdentifier(channel)] = channel
            return .admitted
        }
    }

    /// Forgets a channel.
    func remove(_ channel: any Channel) {
        _ = state.withLock { $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Keeps a refused channel while it waits for its client's first
    /// frame; false (close it now) when `maximumRefusedWaiting` already
    /// wait or shutdown has begun.
    func holdRefused(_ channel: any Channel) -> Bool {
        state.withLock { state in
            guard !state.closing, state.refused.count < Self.maximumRefusedWaiting else { return false }
            state.refused[ObjectIdentifier(channel)] = channel
            return true
        }
    }

    /// Forgets a refused channel.
    func releaseRefused(_ channel: any Channel) {
        _ = state.withLock { $0.refused.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Closes every open channel, and every one added later.
    func closeAll() {
        let open = state.withLock { state in
            state.closing = true
            return Array(state.channels.values) + Array(state.refused.values)
        }
        for channel in open { channel.close(promise: nil) }
    }
}
