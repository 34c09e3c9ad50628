import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Finding F5 with the real daemon: a file copied on disk into another
/// uid's namespace, or renamed on disk, fails integrity when read through it.
@Suite("File binding end to end", .serialized)
struct FileBindingEndToEndTests {
    static let protctl = CommandRunner.builtProduct("protctl")

    @Test("a root file renamed on disk fails integrity; copied into uid 4242's namespace, 4242 cannot read it",
          .enabled(if: getuid() == 0, "needs root to read as uid 4242 (setpriv)"))
    func copiedAndRenamed() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, socketMode: "0666")
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("payroll.csv").write(Array("salaries".utf8), protection: .completeUntilFirstUserAuthentication)
        await client.close()
        let as4242 = ["--reuid=4242", "--regid=4242", "--clear-groups", Self.protctl, "--socket", daemon.socketPath]
        // uid 4242 uses protd once, so its namespace exists.
        let own = try CommandRunner.run("/usr/bin/setpriv", as4242 + ["write", "mine", "--protection", "none"], input: Array("x".utf8))
        #expect(own.status == 0, "\(own.stderr)")

        let payroll = try daemon.diskPath("payroll.csv"), stolenPath = try daemon.diskPath("stolen.csv", uid: 4242)
        let publicPath = try daemon.diskPath("public.csv")
        try FileManager.default.copyItem(atPath: payroll, toPath: stolenPath)
        try FileManager.default.setAttributes([.ownerAccountID: getuid()], ofItemAtPath: stolenPath)
        let stolen = try CommandRunner.run("/usr/bin/setpriv", as4242 + ["read", "stolen.csv"])
        #expect(stolen.status != 0)
        #expect(!stolen.stdout.contains("salaries"))
        #expect(stolen.stderr.contains("integrity"), "\(stolen.stderr)")

        try FileManager.default.moveItem(atPath: payroll, toPath: publicPath)
        let renamed = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "read", "public.csv"])
        #expect(renamed.status != 0)
        #expect(renamed.stderr.contains("integrity"), "\(renamed.stderr)")
        try FileManager.default.moveItem(atPath: publicPath, toPath: payroll)
        let back = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "read", "payroll.csv"])
        #expect(back.stdout == "salaries", "\(back.stderr)")
    }
}
