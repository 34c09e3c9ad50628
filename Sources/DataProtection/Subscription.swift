internal import ProtectionWire
internal import Synchronization

/// Sends `subscribe` at most once per connection, however many event
/// iterators and `subscribe()` calls ask at once; a failed attempt may be
/// retried by the next caller.
final class Subscription: Sendable {
    private typealias Attempt = Task<Result<DaemonStatus, DataProtectionError>, Never>
    private let attempt = Mutex<Attempt?>(nil)

    init() {}

    /// Subscribes unless already subscribed. Returns the status from the
    /// `subscribed` answer and whether this call sent the request.
    @discardableResult
    func ensure(_ connection: Connection) async throws(DataProtectionError) -> (status: DaemonStatus, sentNow: Bool) {
        let (task, created) = attempt.withLock { attempt -> (Attempt, Bool) in
            if let existing = attempt { return (existing, false) }
            let task = Attempt {
                do throws(DataProtectionError) {
                    return .success(try await Subscription.send(connection))
                } catch {
                    return .failure(error)
                }
            }
            attempt = task
            return (task, true)
        }
        switch await task.value {
        case .success(let status):
            return (status, created)
        case .failure(let error):
            attempt.withLock { if $0 == task { $0 = nil } }
            throw error
        }
    }

    private static func send(_ connection: Connection) async throws(DataProtectionError) -> DaemonStatus {
        let response = try await connection.single(.subscribe)
        guard case .subscribed(let report) = response else { throw .unexpected(response, to: "subscribe") }
        return DaemonStatus(report)
    }
}
