import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Shared steps for tests that run the real daemon.
enum EndToEnd {
    static let passcode = "1234-correct-horse"

    /// A daemon with a passcode set, restarted so it is before first unlock,
    /// and a connected client; `firstUnlockTimeout` and `extraConfig` as
    /// `DaemonProcess` takes them. `beforePasscode` runs first, while every
    /// class is available without an unlock.
    static func daemonWithPasscode(
        grace: Double = 10, firstUnlockTimeout: String? = nil, extraConfig: String = "",
        beforePasscode: (DataProtectionClient) async throws -> Void = { _ in }
    ) async throws -> (DaemonProcess, DataProtectionClient) {
        let daemon = try DaemonProcess(gracePeriodSeconds: grace, firstUnlockTimeout: firstUnlockTimeout,
                                       extraConfig: extraConfig)
        let setup = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await beforePasscode(setup)
        try await setup.setPasscode(passcode)
        await setup.close()
        try daemon.restart()
        return (daemon, try await DataProtectionClient.connect(socketPath: daemon.socketPath))
    }

    /// protctl against `daemon` as uid/gid 4242 with no supplementary groups
    /// (needs root, for setpriv).
    static func protctlAsOtherUser(_ daemon: DaemonProcess, _ arguments: [String], input: String? = nil) throws
        -> CommandResult {
        try CommandRunner.run("/usr/bin/setpriv",
                              ["--reuid=4242", "--regid=4242", "--clear-groups", CommandRunner.builtProduct("protctl"),
                               "--socket", daemon.socketPath] + arguments, input: input.map { Array($0.utf8) })
    }

    /// The error code `body` fails with, or nil when it succeeds.
    static func failure(_ body: () async throws -> Void) async -> DataProtectionError.Code? {
        await error(body)?.code
    }

    /// The error `body` fails with, or nil when it succeeds.
    static func error(_ body: () async throws -> Void) async -> DataProtectionError? {
        do {
            try await body()
            return nil
        } catch let error as DataProtectionError {
            return error
        } catch {
            Issue.record("unexpected error type: \(error)")
            return nil
        }
    }

    /// Collects `count` events (fewer if the connection ends first) from
    /// `client`, acknowledging will-become-unavailable when `acknowledge`
    /// is set. The iterator is made before this returns: an iterator only
    /// sees events that arrive after it exists, and one made inside the
    /// task could miss the lock.
    static func collect(
        _ client: DataProtectionClient, count: Int, acknowledge: Bool
    ) -> Task<[ProtectionEvent], any Error> {
        // Handed to the task once and used only there.
        nonisolated(unsafe) var events = client.events.makeAsyncIterator()
        return Task {
            var received: [ProtectionEvent] = []
            while let event = try await events.next() {
                received.append(event)
                if acknowledge, case .willBecomeUnavailable = event.kind { try await client.acknowledge(event) }
                if received.count == count { break }
            }
            return received
        }
    }

    /// Waits (bounded) until `condition` holds.
    static func eventually(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while clock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return try await condition()
    }
}
