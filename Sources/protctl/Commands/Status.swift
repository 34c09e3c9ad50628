import ArgumentParser
import DataProtection
import Foundation

/// `protctl status`: lock state, passcode, recovery key, failed attempts, retry delay,
/// grace period, whether key memory is locked in RAM, and the fault that keeps the daemon from serving files.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the lock state and failed-attempt record.")

    @ParentCommand var root: Protctl

    func run() async throws {
        try await CommandContext(root).run { client in
            let status = try await client.status()
            let retry = status.retryAfter?.components.seconds ?? 0
            let grace = Double(status.gracePeriod.components.seconds)
                + Double(status.gracePeriod.components.attoseconds) / 1e18
            if root.json {
                Output.json(["state": status.state.rawValue, "passcodeSet": status.passcodeSet,
                             "failedAttempts": status.failedAttempts, "retryAfterSeconds": retry,
                             "gracePeriodSeconds": grace, "eventSequence": status.eventSequence,
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
                Output.line("key memory: \(status.keyMemoryLocked ? "locked in RAM" : "NOT locked in RAM, keys could be swapped to disk")")
            }
        }
    }
}
