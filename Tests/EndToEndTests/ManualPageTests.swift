import Foundation
import ProtectionTestSupport
import Testing

/// protd(8) and protctl(1) are written by hand; these checks keep them in
/// step with what the built binaries say they accept.
@Suite("Manual pages")
struct ManualPageTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let sections = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "ENVIRONMENT", "FILES", "EXIT STATUS", "SEE ALSO"]

    static func page(_ name: String) throws -> String {
        try String(contentsOfFile: repository + "/docs/man/" + name, encoding: .utf8)
    }

    /// The page with roff's escaped hyphens read as plain ones.
    static func plain(_ page: String) -> String { page.replacingOccurrences(of: "\\-", with: "-") }

    static func matches(of pattern: String, in text: String) -> [String] {
        let expression = try! NSRegularExpression(pattern: pattern)
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
            String(text[Range($0.range(at: 1), in: text)!])
        }
    }

    @Test("protd(8) has every section and names every key protd --help lists")
    func protdPage() throws {
        let page = Self.plain(try Self.page("protd.8"))
        for section in Self.sections { #expect(page.contains(".SH \(section)"), "no \(section)") }
        let help = try CommandRunner.run(DaemonProcess.binaryPath, ["--help"]).stdout
        let keys = Self.matches(of: #"key ([a-z0-9-]+\.[a-z0-9.-]+),"#, in: help)
        #expect(keys.count > 10)
        for key in keys { #expect(page.contains(".B \(key)"), "protd.8 does not describe \(key)") }
        for code in ["0", "1", "78"] { #expect(page.contains(".B \(code)\n"), "protd.8 lacks exit status \(code)") }
    }

    @Test("protctl(1) has every section, every verb and option, and every exit code protctl's help gives")
    func protctlPage() throws {
        let page = Self.plain(try Self.page("protctl.1"))
        for section in Self.sections { #expect(page.contains(".SH \(section)"), "no \(section)") }
        let protctl = CommandRunner.builtProduct("protctl")
        let help = try CommandRunner.run(protctl, ["--help"]).stdout
        let verbs = Self.matches(of: #"(?m)^  ([a-z]+) {2,}"#, in: help.components(separatedBy: "SUBCOMMANDS:").last ?? "")
        #expect(verbs.count >= 11)
        for verb in verbs {
            #expect(page.contains(verb), "protctl.1 does not describe \(verb)")
            let verbHelp = try CommandRunner.run(protctl, [verb, "--help"]).stdout
            for option in Self.matches(of: #"(?m)^  (--[a-z-]+)"#, in: verbHelp) where option != "--help" {
                #expect(page.contains(option), "protctl.1 does not describe \(verb) \(option)")
            }
        }
        let codes = Self.matches(of: #"(\d+) [a-z]"#, in: help.components(separatedBy: "USAGE:").first ?? "")
        #expect(codes.count >= 9)
        for code in codes { #expect(page.contains(".B \(code)\n"), "protctl.1 lacks exit status \(code)") }
    }
}
