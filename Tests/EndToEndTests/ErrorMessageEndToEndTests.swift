import DataProtection
import Foundation
import Glibc
import ProtectionTestSupport
import Testing

/// What a person reads when something fails: every `DataProtectionError`
/// the real daemon and library produce is one sentence, names no Swift or
/// NIO function, repeats no clause and holds at most one balanced set of
/// parentheses.
@Suite("Error messages a person can act on", .serialized)
struct ErrorMessageEndToEndTests {
    /// Why `text` is not a readable message, or nil when it is.
    static func problem(with text: String) -> String? {
        guard let first = text.first, first.isUppercase else { return "does not start with a capital letter" }
        guard text.hasSuffix(".") || text.hasSuffix(")") else { return "does not end a sentence" }
        let opening = text.filter { $0 == "(" }.count
        let closing = text.filter { $0 == ")" }.count
        guard opening == closing, opening <= 1 else { return "has \(opening) '(' and \(closing) ')'" }
        if opening == 1, text.firstIndex(of: "(")! > text.firstIndex(of: ")")! { return "has ')' before '('" }
        // A Swift function name with argument labels, as NIO's errors print them.
        if text.range(of: #"[A-Za-z]+\([A-Za-z]+:"#, options: .regularExpression) != nil { return "names a function" }
        if text.contains("errno") { return "shows an errno" }
        let clauses = text.lowercased().split(whereSeparator: { ";,().".contains($0) })
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.count > 8 }
        if Set(clauses).count != clauses.count { return "repeats a clause" }
        return nil
    }

    static func check(_ error: DataProtectionError?, _ expected: DataProtectionError.Code,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        guard let error else {
            Issue.record("expected \(expected), got success", sourceLocation: sourceLocation)
            return
        }
        #expect(error.code == expected, "\(error)", sourceLocation: sourceLocation)
        if let problem = problem(with: error.description) {
            Issue.record("the \(error.code) message \(problem): \(error.description)", sourceLocation: sourceLocation)
        }
    }

    @Test("the rules reject what they should")
    func rulesCatchBadMessages() {
        #expect(Self.problem(with: "Fine; do this (detail).") == nil)
        #expect(Self.problem(with: "Bad (connect(descriptor:addr:size:) failed).") != nil)
        #expect(Self.problem(with: "Bad (one) (two).") != nil)
        #expect(Self.problem(with: "Retry in 60 s; retry in 60 s.") != nil)
        #expect(Self.problem(with: "lower case.") != nil)
    }

    @Test("errors from the daemon and the library read as one sentence each")
    func everyReachableError() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0,
                                       extraArguments: ["--passcode-failed-attempt-delays", "0,60"])
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        Self.check(await EndToEnd.error { try await client.lock() }, .noPasscodeSet)
        try await client.setPasscode("right")
        try await client.file("exists").write(Array("x".utf8), protection: .complete)
        Self.check(await EndToEnd.error { _ = try await client.file("missing").read() }, .notFound)
        Self.check(await EndToEnd.error { _ = try await client.file("../up").read() }, .invalidName)
        Self.check(await EndToEnd.error { _ = try await client.file("exists").open(.create(.none)) }, .alreadyExists)
        Self.check(await EndToEnd.error { try await client.lock(grace: .seconds(200_000)) }, .invalidArgument)
        let handle = try await client.file("exists").open()
        await handle.close()
        Self.check(await EndToEnd.error { _ = try await handle.size() }, .handleClosed)
        try await client.lock(grace: .zero)
        Self.check(await EndToEnd.error { _ = try await client.file("exists").read() }, .protectedDataUnavailable)
        Self.check(await EndToEnd.error { try await client.unlock(passcode: "wrong") }, .wrongPasscode)
        Self.check(await EndToEnd.error { try await client.unlock(passcode: "wrong") }, .wrongPasscode)
        Self.check(await EndToEnd.error { try await client.unlock(passcode: "right") }, .rateLimited)

        let cancelled = Task { try await client.file("exists").attributes }
        cancelled.cancel()
        if let error = await EndToEnd.error({ _ = try await cancelled.value }) { Self.check(error, .cancelled) }

        let short = try await DataProtectionClient.connect(socketPath: daemon.socketPath, requestTimeout: .seconds(1))
        daemon.suspend()
        Self.check(await EndToEnd.error { _ = try await short.status() }, .timedOut)
        daemon.resume()
        await short.close()

        await client.close()
        Self.check(await EndToEnd.error { _ = try await client.status() }, .clientClosed)
        Self.check(await EndToEnd.error {
            _ = try await DataProtectionClient.connect(socketPath: daemon.directory.appending("no-such-socket"))
        }, .daemonUnavailable)
    }

    @Test("every code's sentence is readable with a detail of the daemon's kind")
    func everyCode() {
        for code in DataProtectionError.Code.allCases {
            let error = Self.example(code)
            #expect(error.code == code)
            if let problem = Self.problem(with: error.description) {
                Issue.record("the \(code) message \(problem): \(error.description)")
            }
        }
    }

    /// An error of `code` with a typical detail.
    static func example(_ code: DataProtectionError.Code) -> DataProtectionError {
        let detail = "the file notes/today is in class complete"
        return switch code {
        case .protectedDataUnavailable: .protectedDataUnavailable(detail)
        case .notFound: .notFound(detail)
        case .alreadyExists: .alreadyExists(detail)
        case .invalidName: .invalidName(detail)
        case .integrityFailure: .integrityFailure(detail)
        case .wrongPasscode: .wrongPasscode("5 consecutive failed attempts", retryAfter: .seconds(60))
        case .rateLimited: .rateLimited(retryAfter: .seconds(300), message: "6 consecutive failed attempts")
        case .erasedAfterFailedAttempts: .erasedAfterFailedAttempts(detail)
        case .noPasscodeSet: .noPasscodeSet(detail)
        case .invalidArgument: .invalidArgument(detail)
        case .handleClosed: .handleClosed(detail)
        case .keyBagCorrupt: .keyBagCorrupt(detail)
        case .ioFailure: .ioFailure(detail)
        case .cipherUnavailable: .cipherUnavailable(detail)
        case .quotaExceeded: .quotaExceeded(detail)
        case .fileChanged: .fileChanged(detail)
        case .permissionDenied: .permissionDenied(detail)
        case .protocolError: .protocolError(detail)
        case .unsupportedVersion: .unsupportedVersion(detail)
        case .tooManyHandles: .tooManyHandles(detail)
        case .tooManyConnections: .tooManyConnections(detail)
        case .internalError: .internalError(detail)
        case .daemonUnavailable: .daemonUnavailable(detail)
        case .clientClosed: .clientClosed(detail)
        case .timedOut: .timedOut(detail)
        case .cancelled: .cancelled
        }
    }
}
