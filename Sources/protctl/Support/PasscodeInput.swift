import Foundation
import Glibc

/// Reading passcodes: from the terminal without echo, or lines from stdin
/// (for scripts and pam_exec, which sends the password with no newline and
/// a trailing NUL).
enum PasscodeInput {
    /// Lines of standard input, with trailing CR, LF and NUL removed.
    static func stdinLines(_ count: Int) throws -> [String] {
        let data = FileHandle.standardInput.readDataToEndOfFile()
        var text = String(decoding: data, as: UTF8.self)
        while let last = text.unicodeScalars.last, last == "\0" { text.unicodeScalars.removeLast() }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.hasSuffix("\r") ? $0.dropLast() : $0[...])
        }
        if lines.count > count, lines.last == "" { lines.removeLast() }
        guard lines.count >= count, lines.prefix(count).allSatisfy({ !$0.isEmpty }) else {
            throw CommandFailure(description: "expected \(count) non-empty line(s) on standard input", exitCode: 64)
        }
        return Array(lines.prefix(count))
    }

    /// Asks on the terminal with echo off.
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
        tcsetattr(tty, TCSAFLUSH, &quiet)
        defer {
            tcsetattr(tty, TCSAFLUSH, &saved)
            _ = write(tty, "\n", 1)
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(tty, &byte, 1) == 1, byte != UInt8(ascii: "\n") { bytes.append(byte) }
        let answer = String(decoding: bytes, as: UTF8.self)
        for index in bytes.indices { bytes[index] = 0 }
        guard !answer.isEmpty else { throw CommandFailure(description: "the passcode must not be empty", exitCode: 64) }
        return answer
    }
}
