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
        switch await Self.outcome(of: task) {
        case .success(let status):
            return (status, created)
        case .failure(let error):
            // Only the attempt's own failure lets the next caller retry; a
            // caller that was cancelled leaves it running for the others.
            if error.code != .cancelled { attempt.withLock { if $0 == task { $0 = nil } } }
            throw error
        }
    }

    /// `task`'s result, or `.cancelled` as soon as the caller's task is
    /// cancelled: the attempt itself goes on for whoever else waits for it.
    private static func outcome(of task: Attempt) async -> Result<DaemonStatus, DataProtectionError> {
        let waiter = Waiter()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter.set(continuation)
                Task { waiter.resume(with: await task.value) }
                if Task.isCancelled { waiter.resume(with: .failure(.cancelled)) }
            }
        } onCancel: {
            waiter.resume(with: .failure(.cancelled))
        }
    }

    /// A continuation resumed once, by whichever comes first.
    private final class Waiter: Sendable {
        private let continuation = Mutex<CheckedContinuation<Result<DaemonStatus, DataProtectionError>, Never>?>(nil)

        func set(_ waiting: CheckedContinuation<Result<DaemonStatus, DataProtectionError>, Never>) {
            continuation.withLock { $0 = waiting }
        }

        func resume(with result: Result<DaemonStatus, DataProtectionError>) {
            continuation.withLock { $0.take() }?.resume(returning: result)
        }
    }

    private static func send(_ connection: Connection) async throws(DataProtectionError) -> DaemonStatus {
        let response = try await connection.single(.subscribe)
        guard case .subscribed(let report) = response else { throw .unexpected(response, to: "subscribe") }
        return DaemonStatus(report)
    }
}
