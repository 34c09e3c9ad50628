import Foundation
import Glibc
import ProtectionTestSupport
import Testing

/// protctl's passcode prompt on a real terminal (a pseudo-terminal that
/// `setsid --ctty` makes protctl's controlling terminal): echo is off while
/// it asks, and back on however protctl ends. `setsid --wait` ends the way
/// protctl ended (by the same signal, or with its exit status).
@Suite("Passcode prompt on a terminal", .serialized)
struct PasscodePromptEndToEndTests {
    static let setsid = ["/usr/bin/setsid", "/bin/setsid"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// What became of one `protctl passwd` on a terminal.
    struct Outcome {
        var echoDuring: Bool
        var echoAfter: Bool
        var reason: Process.TerminationReason
        var status: Int32
    }

    /// Starts `protctl passwd` on a new terminal; for each step, waits until
    /// the terminal shows its text, then types its keys. Returns whether the
    /// terminal echoed at the first prompt and after protctl ended, and how
    /// it ended.
    private func passwd(_ steps: [(awaiting: String, keys: [UInt8])]) throws -> Outcome {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        var terminal: Int32 = -1, side: Int32 = -1
        let opened = openpty(&terminal, &side, nil, nil, nil)
        try #require(opened == 0)
        defer { close(terminal) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.setsid))
        process.arguments = ["--ctty", "--wait", ProtctlCommand.path, "--socket", daemon.socketPath, "passwd"]
        let handle = FileHandle(fileDescriptor: side, closeOnDealloc: true)
        process.standardInput = handle
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        var shown = ""
        var echoDuring: Bool?
        for step in steps {
            // What protctl writes to /dev/tty arrives on the terminal's other side.
            let deadline = ContinuousClock.now + .seconds(20)
            while !shown.contains(step.awaiting), ContinuousClock.now < deadline {
                var ready = pollfd(fd: terminal, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 200) > 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 256)
                let count = read(terminal, &buffer, buffer.count)
                if count > 0 { shown += String(decoding: buffer[..<count], as: UTF8.self) }
            }
            try #require(shown.contains(step.awaiting), "\(shown)")
            if echoDuring == nil {
                var settings = termios()
                tcgetattr(terminal, &settings)
                echoDuring = settings.c_lflag & tcflag_t(ECHO) != 0
            }
            _ = write(terminal, step.keys, step.keys.count)
        }
        process.waitUntilExit()
        var settings = termios()
        tcgetattr(terminal, &settings)
        return Outcome(echoDuring: echoDuring ?? true, echoAfter: settings.c_lflag & tcflag_t(ECHO) != 0,
                       reason: process.terminationReason, status: process.terminationStatus)
    }

    @Test("Ctrl-C or Ctrl-\\ at the prompt ends protctl by its signal with the terminal's echo back on",
          .enabled(if: setsid != nil, "needs util-linux's setsid"), arguments: [(UInt8(0x03), SIGINT), (UInt8(0x1C), SIGQUIT)])
    func signalRestoresEcho(key: UInt8, signal: Int32) throws {
        let outcome = try passwd([("New passcode: ", [key])])
        #expect(!outcome.echoDuring)
        #expect(outcome.echoAfter)
        // setsid --wait ends by the same signal, or exits with its number, as util-linux versions differ.
        #expect(outcome.status == signal, "\(outcome)")
    }

    @Test("Ctrl-Z at the prompt is ignored: the passcode is still read, without echo",
          .enabled(if: setsid != nil, "needs util-linux's setsid"))
    func suspendIsIgnored() throws {
        // Two different passcodes after the Ctrl-Z: both read, and refused as differing (exit 64).
        let outcome = try passwd([("New passcode: ", [0x1A] + Array("first\n".utf8)),
                                  ("New passcode again: ", Array("second\n".utf8))])
        #expect(!outcome.echoDuring)
        #expect(outcome.echoAfter)
        #expect(outcome.reason == .exit && outcome.status == 64, "\(outcome)")
    }
}
