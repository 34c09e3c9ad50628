import ProtectionCore
import ProtectionTestSupport
import ProtectionVersion
import Sodium
import Testing

/// `--version` on the built executables.
@Suite("Version")
struct VersionEndToEndTests {
    @Test("protd --version prints the release, the libsodium it links and the cipher new files get here, and exits 0")
    func protdVersion() throws {
        let result = try CommandRunner.run(DaemonProcess.binaryPath, ["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "protd \(ProtdVersion.current) (libsodium \(SodiumRuntime.version), "
            + "new files: \(ContentCipher.preferred))\n")
    }

    @Test("protctl --version prints the same release")
    func protctlVersion() throws {
        let result = try CommandRunner.run(CommandRunner.builtProduct("protctl"), ["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "protctl \(ProtdVersion.current)\n")
    }
}
