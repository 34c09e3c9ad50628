/// The lock-state events of one client, as an `AsyncSequence`.
///
/// Each iterator has its own buffer that keeps the newest 256 events (older
/// ones are dropped if the consumer falls that far behind; the daemon also
/// drops beyond 64 per connection). A jump in `sequence` means events were
/// missed: call `DataProtectionClient.status()` to resynchronise. Events
/// whose `sequence` is at most the `eventSequence` that `subscribe()`
/// returned are already reflected in that status. An iterator receives the
/// events that arrive after it was made. Its first `next()` subscribes the connection if it is not
/// subscribed yet (once per client) and throws if that fails. The sequence
/// finishes when the connection closes.
public struct ProtectionEvents: AsyncSequence, Sendable {
    /// The events.
    public typealias Element = ProtectionEvent
    /// Only subscribing can fail.
    public typealias Failure = DataProtectionError

    /// How many undelivered events each iterator keeps.
    public static let bufferSize = 256

    let client: DataProtectionClient

    /// Registers a buffer for the new iterator.
    public func makeAsyncIterator() -> Iterator {
        let (stream, continuation) = AsyncStream.makeStream(of: ProtectionEvent.self,
                                                            bufferingPolicy: .bufferingNewest(Self.bufferSize))
        client.connection.router.addSubscriber(continuation)
        return Iterator(base: stream.makeAsyncIterator(), client: client)
    }

    /// Delivers one subscriber's events.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<ProtectionEvent>.Iterator
        let client: DataProtectionClient
        var subscribed = false

        /// The next event, or nil once the connection closed.
        public mutating func next() async throws(DataProtectionError) -> ProtectionEvent? {
            if !subscribed {
                try await client.subscription.ensure(client.connection)
                subscribed = true
            }
            return await base.next()
        }

        /// The next event, or nil once the connection closed.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(DataProtectionError) -> ProtectionEvent? {
            if !subscribed {
                try await client.subscription.ensure(client.connection)
                subscribed = true
            }
            return await base.next(isolation: actor)
        }
    }
}
