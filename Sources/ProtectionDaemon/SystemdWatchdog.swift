public import ServiceLifecycle

/// Pings systemd's watchdog at half the interval it asked for, until a
/// graceful shutdown.
public struct SystemdWatchdog: Service {
    private let notifier: SystemdNotifier
    private let interval: Duration

    /// A watchdog pinging through `notifier` every `interval`.
    public init(notifier: SystemdNotifier, interval: Duration) {
        self.notifier = notifier
        self.interval = interval
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                notifier.watchdog()
                try await Task.sleep(for: interval)
            }
        }
    }
}
