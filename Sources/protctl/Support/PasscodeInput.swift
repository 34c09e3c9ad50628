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
    /// meanwhile turn echo back on before protctl ends.
    static func prompt(_ text: String) throws -> String {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else {
            throw CommandFailure(description: "no terminal to ask for the passcode; use --stdin", exitCode: 64)
        }
        defer { close(tty) }
        _ = text.withCString { write(tty, $0, strlen($0)) }
        var saved = termios()
        tcgetattr(tty, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        EchoRestore.arm(tty: tty, settings: saved)
        tcsetattr(tty, TCSAFLUSH, &quiet)
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
/// prompt has it off: the shell would otherwise be left typing blind.
private enum EchoRestore {
    /// The terminal and its settings before the prompt; read by the handler.
    nonisolated(unsafe) private static var tty: Int32 = -1
    nonisolated(unsafe) private static var settings = termios()
    private static let signals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    static func arm(tty: Int32, settings: termios) {
        Self.settings = settings
        Self.tty = tty
        for signal in signals {
            Glibc.signal(signal) { received in
                if EchoRestore.tty >= 0 { tcsetattr(EchoRestore.tty, TCSAFLUSH, &EchoRestore.settings) }
                // Then end as the signal would have ended protctl.
                Glibc.signal(received, SIG_DFL)
                raise(received)
            }
        }
    }

    static func disarm() {
        for signal in signals { Glibc.signal(signal, SIG_DFL) }
        tty = -1
    }
}
