/// A function `DataProtectionClient.observeEvents(_:)` calls with every
/// event, on the connection's I/O thread.
public typealias EventObserver = @Sendable (ProtectionEvent) -> EventReply

/// What an event observer asks the library to do once it has seen an event.
public enum EventReply: Sendable, Equatable {
    /// Nothing.
    case none
    /// Acknowledge a `willBecomeUnavailable` event (the observer's class
    /// `.complete` files are closed), sent at once from the I/O thread.
    /// Ignored for the other events. The daemon counts a client as one
    /// subscriber: one observer's acknowledgement (or one
    /// `acknowledge(_:)` call) counts for every observer and `events`
    /// iterator of that client, so acknowledge only once every part of
    /// the application that reads class `.complete` files is done.
    case acknowledge
}

/// An event observer's registration: the observer is called until
/// `cancel()`, the release of the last reference to this object, or the
/// end of the connection, whichever comes first.
public final class EventObservation: Sendable {
    private let router: RequestRouter
    private let key: UInt64

    init(router: RequestRouter, key: UInt64) {
        self.router = router
        self.key = key
    }

    /// Stops calling the observer. An event being delivered at that moment
    /// may still reach it.
    public func cancel() {
        router.removeObserver(key)
    }

    deinit {
        router.removeObserver(key)
    }
}
