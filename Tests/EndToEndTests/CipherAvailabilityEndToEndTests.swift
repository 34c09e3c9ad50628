import DataProtection
import Foundation
import ProtectionCore
import ProtectionTestSupport
import Testing

/// Files written with AES-256-GCM meeting a CPU without AES-NI, as in a VM
/// whose CPU model hides it: protd runs under qemu's user-mode emulator as
/// a Nehalem, which has neither AES-NI nor PCLMUL.
@Suite("Cipher availability", .serialized)
struct CipherAvailabilityEndToEndTests {
    static let qemu = ["/usr/bin/qemu-x86_64", "/usr/local/bin/qemu-x86_64"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let protctl = CommandRunner.builtProduct("protctl")
    /// An x86-64 host that writes AES files natively and can emulate a CPU that cannot read them.
    static var canCompare: Bool {
        #if arch(x86_64)
        qemu != nil && ContentCipher.aes256GCM.isAvailable
        #else
        false
        #endif
    }

    /// Runs protd emulated on a CPU without AES-NI.
    private static func withoutAESNI() throws -> [String] { [try #require(qemu), "-cpu", "Nehalem"] }

    @Test("without AES-NI: AES files are cipherUnavailable and intact, new ones XChaCha20, a forged algorithm byte is integrityFailure, aes-256-gcm is refused",
          .enabled(if: canCompare, "needs an x86-64 CPU with AES-NI and qemu-x86_64 (Debian package qemu-user)"))
    func filesMeetACPUWithoutAESNI() async throws {
        let daemon = try DaemonProcess()
        #expect(daemon.log.contains("protd.cipher=aes-256-gcm"))
        let content = Array("sealed with AES-256-GCM".utf8)
        var client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("aes").write(content, protection: .none)
        await client.close()

        daemon.stop()
        daemon.launcher = try Self.withoutAESNI()
        try daemon.start()
        #expect(daemon.log.contains("protd.cipher=xchacha20-poly1305"))
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let aes = client.file("aes")
        #expect(await EndToEnd.failure { _ = try await aes.read() } == .cipherUnavailable)
        #expect(await EndToEnd.failure { _ = try await aes.open(.existing) } == .cipherUnavailable)
        #expect(await EndToEnd.failure { try await aes.setProtection(.complete) } == .cipherUnavailable)
        let refused = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "read", "aes"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("AES-NI"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("storage or memory"), "\(refused.stderr)")
        try await client.file("new").write(content, protection: .none)
        #expect(try await client.file("new").read() == content)
        await client.close()

        // A header whose algorithm byte was changed from 1 to 2 fails its tag
        // before the CPU is asked about AES: tampering, not a missing feature.
        daemon.stop()
        let newPath = daemon.stateDirectory + "/store/\(getuid())/files/new"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: newPath))
        #expect(bytes[5] == ContentCipher.xChaCha20Poly1305.rawValue)
        bytes[5] = ContentCipher.aes256GCM.rawValue
        try bytes.write(to: URL(fileURLWithPath: newPath))
        try daemon.start()
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(await EndToEnd.failure { _ = try await client.file("new").read() } == .integrityFailure)
        await client.close()
        daemon.stop()

        let config = daemon.directory.appending("aes.yaml")
        try (String(contentsOfFile: daemon.configPath, encoding: .utf8) + "storage:\n  cipher: aes-256-gcm\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let emulator = try Self.withoutAESNI()
        let start = try CommandRunner.run(emulator[0], Array(emulator.dropFirst()) + [DaemonProcess.binaryPath, "--config", config])
        #expect(start.status == 78)
        #expect(start.stderr.contains("storage.cipher") && start.stderr.contains("AES-NI"), "\(start.stderr)")

        // Back on the CPU that wrote it, the AES file reads as written.
        daemon.launcher = []
        try daemon.start()
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        #expect(try await client.file("aes").read() == content)
        await client.close()
    }
}
