import Foundation
import ProtectionTestSupport

// protd-harness-probe DIR: starts one protd in DIR as the tests and the
// benchmarks do, then waits for a signal, so that InterruptedHarnessTests
// can check that an interrupted harness takes its daemon and its directory
// with it (LiveDaemons).
let daemon = try DaemonProcess(parentDirectory: CommandLine.arguments[1])
withExtendedLifetime(daemon) {
    while true { sleep(60) }
}
