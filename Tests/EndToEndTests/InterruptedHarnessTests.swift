import Foundation
import ProtectionTestSupport
import Testing

/// A test run or benchmark that is interrupted takes its daemons, and
/// their directories, with it (`LiveDaemons`). The harness here is
/// protd-harness-probe, which starts one daemon as both do; the benchmarks
/// are a package of their own.
@Suite("Interrupted harness")
struct InterruptedHarnessTests {
    @Test("a harness stopped by SIGTERM or SIGINT kills its protd and removes its directory",
          arguments: [SIGTERM, SIGINT])
    func interruptedHarnessCleansUp(signal: Int32) throws {
        let parent = try TemporaryDirectory("i")
        defer { parent.remove() }
        let harness = Process()
        harness.executableURL = URL(fileURLWithPath: CommandRunner.builtProduct("protd-harness-probe"))
        harness.arguments = [parent.path]
        harness.standardOutput = FileHandle.nullDevice
        harness.standardError = FileHandle.nullDevice
        try harness.run()
        let daemon = try #require(Self.child(of: harness.processIdentifier, named: "protd"), "the harness started no protd")
        let directories = try FileManager.default.contentsOfDirectory(atPath: parent.path).filter { $0.hasPrefix("protd-daemon-") }
        try #require(directories.count == 1)
        // protd creates its socket milliseconds after the spawn; the harness
        // records the daemon right after the spawn returns. Waiting for the
        // socket keeps the signal from falling in between.
        let socket = parent.appending(directories[0] + "/s")
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: socket) && Date() < deadline { usleep(20_000) }

        kill(harness.processIdentifier, signal)
        harness.waitUntilExit()
        // Usually it dies of the signal; it may also fail on its own first
        // when it sees its daemon killed. Either way it must not succeed.
        #expect(harness.terminationReason == .uncaughtSignal || harness.terminationStatus != 0)
        // The daemon was the harness's child; once that is gone, init reaps it.
        let reaped = Date().addingTimeInterval(5)
        while kill(daemon, 0) == 0 && Date() < reaped { usleep(20_000) }
        #expect(kill(daemon, 0) != 0, "protd \(daemon) outlived the harness")
        let left = try FileManager.default.contentsOfDirectory(atPath: parent.path).filter { $0.hasPrefix("protd-daemon-") }
        #expect(left.isEmpty, "left behind: \(left)")
    }

    /// The pid of a child of `parent` whose command is `name`, waiting up to 20 s for one.
    static func child(of parent: Int32, named name: String) -> Int32? {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                guard let pid = Int32(entry), let stat = ProcessStat(pid: pid) else { continue }
                if stat.command == name, stat.parentPID == parent { return pid }
            }
            usleep(50_000)
        }
        return nil
    }
}
