/// One wake-up the lock controller waits for: the instant it is set for
/// and the task that sleeps until then. Setting the instant it already
/// has changes nothing; setting another cancels the old task.
struct Alarm<Instant: Equatable & Sendable> {
    /// The instant it is set for, or nil when off.
    private(set) var instant: Instant?
    private var task: Task<Void, Never>?

    /// Sets the alarm for `instant` (nil: off); `start` makes the task
    /// that waits for it and acts.
    mutating func set(_ instant: Instant?, start: (Instant) -> Task<Void, Never>) {
        guard instant != self.instant else { return }
        task?.cancel()
        self.instant = instant
        task = instant.map(start)
    }

    /// The alarm went off: forgets it, without cancelling its task (the caller).
    mutating func rang() {
        instant = nil
        task = nil
    }

    /// Turns it off.
    mutating func cancel() {
        task?.cancel()
        task = nil
        instant = nil
    }
}
