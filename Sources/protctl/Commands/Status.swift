import ArgumentParser
import DataProtection
import Foundation

/// `protctl status`: lock state, passcode, recovery key, failed attempts,
/// retry delay, grace period, first-unlock timeout, whether key memory is
/// locked in RAM, and the fault that keeps the daemon from serving files.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the lock state and failed-attempt record.")

    @ParentCommand var root: Protctl

    func run() async throws {
        try await CommandContext(root).run { client in
            let status = try await client.status()
            let retry = status.retryAfter?.components.seconds ?? 0
            let grace = Self.seconds(status.gracePeriod)
            if root.json {
                Output.json(["state": status.state.rawValue, "passcodeSet": status.passcodeSet,
                             "failedAttempts": status.failedAttempts, "retryAfterSeconds": retry,
                             "gracePeriodSeconds": grace, "eventSequence": status.eventSequence,
                             "firstUnlockTimeoutSeconds": status.firstUnlockTimeout.map(Self.seconds) ?? NSNull(),
                             "firstUnlockTimeoutRemainingSeconds": status.firstUnlockTimeoutRemaining.map(Self.seconds) ?? NSNull(),
                             "keyMemoryLocked": status.keyMemoryLocked, "recoveryKeySet": status.recoveryKeySet,
                             "fault": status.fault ?? NSNull()])
            } else {
                if let fault = status.fault { Output.line("fault: \(fault)") }
                Output.line("state: \(status.state)")
                Output.line("passcode set: \(status.passcodeSet ? "yes" : "no")")
                Output.line("recovery key: \(status.recoveryKeySet ? "set" : "not set")")
                Output.line("failed attempts: \(status.failedAttempts)")
                Output.line("next unlock attempt: \(retry > 0 ? "in \(retry) s" : "now")")
                Output.line("grace period: \(grace) s")
                Output.line("first-unlock timeout: \(Self.firstUnlockTimeout(status))")
                Output.line("key memory: \(status.keyMemoryLocked ? "locked in RAM" : "NOT locked in RAM, keys could be swapped to disk")")
            }
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// "off", "72h 00m, not running", or "72h 00m, beforeFirstUnlock in 71h 59m".
    private static func firstUnlockTimeout(_ status: DaemonStatus) -> String {
        guard let timeout = status.firstUnlockTimeout else { return "off" }
        guard let remaining = status.firstUnlockTimeoutRemaining else { return "\(text(timeout)), not running" }
        return "\(text(timeout)), beforeFirstUnlock in \(text(remaining))"
    }

    /// `72h 00m`, `4m 05s` or `3.2s`.
    private static func text(_ duration: Duration) -> String {
        let seconds = seconds(duration)
        let whole = Int(seconds)
        if whole >= 3600 { return String(format: "%dh %02dm", whole / 3600, whole % 3600 / 60) }
        if whole >= 60 { return String(format: "%dm %02ds", whole / 60, whole % 60) }
        return String(format: "%.1fs", seconds)
    }
}
