import ArgumentParser
import DataProtection
import Foundation

/// `protctl check`: an fsck of the daemon's store that changes nothing.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every name, sidecar and file header in the store, changing nothing.",
        discussion: """
            Needs root or the admin group. Key slots and header tags are verified where the file's class key is \
            in memory (class A files are not while locked). Exits 65 when it finds a problem.
            """)

    @ParentCommand var root: Protctl

    /// How long the daemon may take to walk a large store.
    private static let timeout = Duration.seconds(3600)

    func run() async throws {
        try await CommandContext(root).run { client in
            let report = try await client.checkStore(timeout: Self.timeout)
            if root.json {
                Output.json(["namespaces": report.namespaces, "files": report.files,
                             "verifiedFiles": report.verifiedFiles, "unverifiableFiles": report.unverifiableFiles,
                             "problemCount": report.problemCount, "clean": report.isClean,
                             "problems": report.problems.map(Self.fields)])
            } else {
                Output.line("namespaces: \(report.namespaces)")
                Output.line("files: \(report.files), key slots verified: \(report.verifiedFiles), "
                            + "not verifiable (class key not in memory): \(report.unverifiableFiles)")
                let listed = report.problems.count < report.problemCount ? " (the first \(report.problems.count) listed)" : ""
                Output.line("problems: \(report.isClean ? "none" : "\(report.problemCount)\(listed)")")
                for problem in report.problems { Output.line(Self.line(problem)) }
            }
            if !report.isClean { throw ExitCode(ExitCodes.dataError) }
        }
    }

    /// `path (uid 1000, "name"): description`, control characters escaped.
    private static func line(_ problem: StoreCheckReport.Problem) -> String {
        let whose = [problem.uid.map { "uid \($0)" }, problem.name.map { String(reflecting: $0) }].compactMap(\.self)
        let context = whose.isEmpty ? "" : " (\(whose.joined(separator: ", ")))"
        return Output.printable("\(problem.path)\(context): \(problem.description)")
    }

    private static func fields(_ problem: StoreCheckReport.Problem) -> [String: Any] {
        ["uid": problem.uid.map { $0 as Any } ?? NSNull(), "name": problem.name.map { $0 as Any } ?? NSNull(),
         "path": problem.path, "description": problem.description]
    }
}
