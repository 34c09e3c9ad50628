import Foundation
import ProtectionTestSupport
import Testing

/// An application that imports DataProtection does no cryptography, so it
/// must not need libsodium to build or run: protctl, which depends on
/// DataProtection alone, is the check (protd, which does the crypto, is
/// the control that shows the check can see libsodium at all).
@Suite("The client library does not link libsodium")
struct ClientDependencyTests {
    /// The shared libraries `binary` needs, as `ldd` lists them.
    static func sharedLibraries(of binary: String) throws -> String {
        try CommandRunner.run("/usr/bin/ldd", [binary]).stdout
    }

    @Test("protctl needs no libsodium, while protd does")
    func protctlLinksNoLibsodium() throws {
        let daemon = try Self.sharedLibraries(of: CommandRunner.builtProduct("protd"))
        let client = try Self.sharedLibraries(of: CommandRunner.builtProduct("protctl"))
        #expect(daemon.contains("libsodium"), "ldd protd: \(daemon)")
        #expect(!client.contains("libsodium"), "ldd protctl: \(client)")
    }
}
