import Foundation
import Glibc

/// Reading passcodes: from the terminal without echo, or lines from stdin
/// (for scripts and pam_exec, which sends the password with no newline and
/// a trailing NUL).
enum PasscodeInput {
    /// Lines of standard input, with trailing CR, LF and NUL removed.
    static func stdinLines(_ count: Int) throws -> [String] {
        var data = FileHandle.standardInput.readDataToEndOfFile()
        // Keep no copy beyond the returned lines: wipe the bytes read.
        defer { data.resetBytes(in: data.startIndex..<data.endIndex) }
        var lines = splitLines(data)
        if lines.count > count, lines.last == "" { lines.removeLast() }
        guard lines.count >= count, lines.prefix(count).allSatisfy({ !$0.isEmpty }) else {
            throw CommandFailure(description: "expected \(count) non-empty line(s) on standard input", exitCode: 64)
        }
        return Array(lines.prefix(count))
    }

    /// `data` without trailing NULs, split at LF bytes, one trailing CR
    /// removed from each line. Bytes, not `Character`s: Swift reads "\r\n"
    /// as one `Character`, so splitting a `String` at "\n" keeps CRLF lines whole.
    private static func splitLines(_ data: Data) -> [String] {
        var end = data.endIndex
        while end > data.startIndex, data[end - 1] == 0 { end -= 1 }
        return data[data.startIndex..<end].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            String(decoding: $0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0, as: UTF8.self)
        }
    }

    /// Asks for a new passcode twice on the terminal; they must match.
    static func promptNew() throws -> String {
        let new = try prompt("New passcode: ")
        guard try prompt("New passcode again: ") == new else {
            throw CommandFailure(description: "the two new passcodes differ; nothing changed", exitCode: 64)
        }
        return new
    }

    /// The passcode read from the terminal at most (longer ones are refused
    /// here, not by the daemon's frame limit).
    static let maximumBytes = 4096

    /// Asks on the terminal with echo off; Ctrl-C, a hang-up or SIGTERM
    /// meanwhile turn echo back on before protctl ends (`EchoRestore`).
    static func prompt(_ text: String) throws -> String {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else {
            throw CommandFailure(description: "no terminal to ask for the passcode; use --stdin", exitCode: 64)
        }
        defer { close(tty) }
        var saved = termios()
        tcgetattr(tty, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        EchoRestore.arm(tty: tty, settings: saved)
        tcsetattr(tty, TCSAFLUSH, &quiet)
        // Asked only once echo is off: what is typed as soon as the prompt shows is not echoed.
        _ = text.withCString { write(tty, $0, strlen($0)) }
        defer {
            tcsetattr(tty, TCSAFLUSH, &saved)
            EchoRestore.disarm()
            _ = write(tty, "\n", 1)
        }
        // Room for the longest passcode up front: a growing array would leave unzeroed copies behind.
        var bytes = [UInt8](repeating: 0, count: maximumBytes + 1)
        defer { for index in bytes.indices { bytes[index] = 0 } }
        var count = 0
        var byte: UInt8 = 0
        while read(tty, &byte, 1) == 1, byte != UInt8(ascii: "\n") {
            if count < bytes.count { bytes[count] = byte }
            count += 1
        }
        byte = 0
        guard count <= maximumBytes else {
            throw CommandFailure(description: "the passcode is longer than \(maximumBytes) bytes", exitCode: 64)
        }
        let answer = String(decoding: bytes[..<count], as: UTF8.self)
        guard !answer.isEmpty else { throw CommandFailure(description: "the passcode must not be empty", exitCode: 64) }
        return answer
    }
}

/// Turns the terminal's echo back on when a signal ends protctl while a
/// prompt has it off: the shell would otherwise be left typing blind. While
/// armed, SIGINT, SIGQUIT, SIGTERM and SIGHUP restore the terminal and then
/// end protctl as they would have (signals it ignored stay ignored), Ctrl-Z
/// is ignored (a stopped prompt would leave echo off), and core dumps are
/// off (SIGQUIT's would hold the bytes typed so far).
private enum EchoRestore {
    /// The terminal and its settings before the prompt; set before the
    /// handlers are installed, and only read by them.
    nonisolated(unsafe) private static var tty: Int32 = -1
    nonisolated(unsafe) private static var settings = termios()
    /// The actions replaced and the thread's signal mask, put back by `disarm`.
    nonisolated(unsafe) private static var replaced: [(Int32, sigaction)] = []
    nonisolated(unsafe) private static var mask = sigset_t()
    private static let ending = [SIGINT, SIGQUIT, SIGTERM, SIGHUP]

    static func arm(tty: Int32, settings: termios) {
        Self.settings = settings
        Self.tty = tty
        var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
        setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore)
        for signal in ending {
            var current = sigaction()
            sigaction(signal, nil, &current)
            // A signal the caller ignored (nohup) stays ignored.
            if unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self) {
                continue
            }
            install(signal) { received in
                tcsetattr(EchoRestore.tty, TCSAFLUSH, &EchoRestore.settings)
                // Then end as the signal would have ended protctl.
                Glibc.signal(received, SIG_DFL)
                raise(received)
            }
        }
        install(SIGTSTP, SIG_IGN)
        // A parent may have left them blocked (the mask is inherited): this thread takes them.
        var handled = sigset_t()
        sigemptyset(&handled)
        for signal in ending { sigaddset(&handled, signal) }
        pthread_sigmask(SIG_UNBLOCK, &handled, &mask)
    }

    static func disarm() {
        pthread_sigmask(SIG_SETMASK, &mask, nil)
        for (signal, action) in replaced.reversed() {
            var action = action
            sigaction(signal, &action, nil)
        }
        replaced = []
    }

    private static func install(_ signal: Int32, _ handler: (@convention(c) (Int32) -> Void)?) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = handler
        sigemptyset(&action.sa_mask)
        var old = sigaction()
        sigaction(signal, &action, &old)
        replaced.append((signal, old))
    }
}
