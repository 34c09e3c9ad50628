internal import NIOCore
internal import ProtectionWire
internal import Synchronization

/// The open client channels, so shutdown can close them all and the
/// connection limits can be enforced (`ConnectionSlots`); and the few
/// refused ones still waiting to close (see `holdRefused`).
final class ConnectionRegistry: Sendable {
    /// Refused connections kept open at once until their client's first
    /// frame; beyond that they are closed at once.
    static let maximumRefusedWaiting = 16

    /// Whether a new channel may be served.
    enum Admission {
        /// Served, on a slot of this kind.
        case admitted(ConnectionSlots.Slot)
        /// A limit was reached; the error names it.
        case full(WireError)
        /// Shutdown has begun: nothing new is served.
        case closing
    }

    private struct Open {
        let channel: any Channel
        let uid: UInt32
        let slot: ConnectionSlots.Slot
    }

    private struct State {
        var slots: ConnectionSlots
        var channels: [ObjectIdentifier: Open] = [:]
        var refused: [ObjectIdentifier: any Channel] = [:]
        var closing = false
    }

    private let state: Mutex<State>

    /// An empty registry enforcing `limits`.
    init(limits: ClientLimits) {
        state = Mutex(State(slots: ConnectionSlots(limits: limits)))
    }

    /// Adds a channel of `uid` unless a limit is reached or the registry is closing.
    func add(_ channel: any Channel, uid: UInt32, isAdmin: Bool) -> Admission {
        state.withLock { state in
            if state.closing { return .closing }
            switch state.slots.admit(uid: uid, isAdmin: isAdmin) {
            case .failure(let refusal):
                return .full(refusal)
            case .success(let slot):
                state.channels[ObjectIdentifier(channel)] = Open(channel: channel, uid: uid, slot: slot)
                return .admitted(slot)
            }
        }
    }

    /// Forgets a channel and frees its slot.
    func remove(_ channel: any Channel) {
        state.withLock { state in
            guard let open = state.channels.removeValue(forKey: ObjectIdentifier(channel)) else { return }
            state.slots.release(open.slot, uid: open.uid)
        }
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
            return state.channels.values.map(\.channel) + Array(state.refused.values)
        }
        for channel in open { channel.close(promise: nil) }
    }
}
