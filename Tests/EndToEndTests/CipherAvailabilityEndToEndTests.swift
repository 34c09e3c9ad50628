import DataProtection
import Foundation
@testable import ProtectionCore
import ProtectionTestSupport
import Sodium
import Testing

/// Files written with AEGIS-256 and AES-256-GCM meeting a CPU without
/// AES-NI, as in a VM whose CPU model hides it (protd runs under qemu's
/// user-mode emulator as a Nehalem, which has neither AES-NI nor PCLMUL),
/// and an AEGIS-256 file meeting a libsodium older than 1.0.19.
@Suite("Cipher availability", .serialized)
struct CipherAvailabilityEndToEndTests {
    static let qemu = ["/usr/bin/qemu-x86_64", "/usr/local/bin/qemu-x86_64"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let protctl = CommandRunner.builtProduct("protctl")
    /// The ciphers that need AES instructions and run here (AEGIS-256 only
    /// with libsodium 1.0.19 or later).
    static let aesCiphers: [ContentCipher] = [.aegis256, .aes256GCM].filter(\.isAvailable)
    /// An x86-64 host that writes them natively and can emulate a CPU that cannot read them.
    static var canCompare: Bool {
        #if arch(x86_64)
        qemu != nil && !aesCiphers.isEmpty
        #else
        false
        #endif
    }

    /// Runs protd emulated on a CPU without AES-NI.
    private static func withoutAESNI() throws -> [String] { [try #require(qemu), "-cpu", "Nehalem"] }

    @Test("without AES-NI: files sealed on AES instructions are cipherUnavailable and intact, new ones XChaCha20, a forged algorithm byte is integrityFailure, those ciphers are refused",
          .enabled(if: canCompare, "needs an x86-64 CPU with AES-NI and qemu-x86_64 (Debian package qemu-user)"))
    func filesMeetACPUWithoutAESNI() async throws {
        let daemon = try DaemonProcess()
        let content = Array("sealed with a cipher on AES instructions".utf8)
        // The default (auto) writes the first of them here; the setting, the other.
        for cipher in Self.aesCiphers {
            if cipher != .preferred {
                daemon.stop()
                try daemon.start(extraArguments: ["--storage-cipher", cipher.description])
            }
            #expect(daemon.log.contains("protd.cipher=\(cipher)"))
            let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            try await client.file("\(cipher)").write(content, protection: .none)
            await client.close()
        }

        daemon.stop()
        daemon.launcher = try Self.withoutAESNI()
        try daemon.start()
        #expect(daemon.log.contains("protd.cipher=xchacha20-poly1305"))
        var client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        for cipher in Self.aesCiphers {
            let file = client.file("\(cipher)")
            #expect(await EndToEnd.failure { _ = try await file.read() } == .cipherUnavailable)
            #expect(await EndToEnd.failure { _ = try await file.open(.existing) } == .cipherUnavailable)
            #expect(await EndToEnd.failure { try await file.setProtection(.complete) } == .cipherUnavailable)
            let refused = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "read", "\(cipher)"])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("\(cipher)") && refused.stderr.contains("AES-NI"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("storage or memory"), "\(refused.stderr)")
        }
        try await client.file("new").write(content, protection: .none)
        #expect(try await client.file("new").read() == content)
        await client.close()

        // A header whose algorithm byte was changed from 1 to either fails
        // its tag before the CPU is asked about AES: tampering, not a
        // missing feature.
        daemon.stop()
        let newPath = try daemon.diskPath("new")
        let original = try Data(contentsOf: URL(fileURLWithPath: newPath))
        #expect(original[5] == ContentCipher.xChaCha20Poly1305.rawValue)
        for cipher in Self.aesCiphers {
            var bytes = original
            bytes[5] = cipher.rawValue
            try bytes.write(to: URL(fileURLWithPath: newPath))
            try daemon.start()
            client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            #expect(await EndToEnd.failure { _ = try await client.file("new").read() } == .integrityFailure, "forged \(cipher)")
            await client.close()
            daemon.stop()
        }

        let emulator = try Self.withoutAESNI()
        for cipher in Self.aesCiphers {
            let config = daemon.directory.appending("\(cipher).yaml")
            try (String(contentsOfFile: daemon.configPath, encoding: .utf8) + "storage:\n  cipher: \(cipher)\n")
                .write(toFile: config, atomically: true, encoding: .utf8)
            let start = try CommandRunner.run(emulator[0], Array(emulator.dropFirst()) + [DaemonProcess.binaryPath, "--config", config])
            #expect(start.status == 78, "\(cipher)")
            #expect(start.stderr.contains("storage.cipher") && start.stderr.contains("AES-NI"), "\(start.stderr)")
        }

        // Back on the CPU that wrote them, both files read as written.
        daemon.launcher = []
        try daemon.start()
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        for cipher in Self.aesCiphers {
            #expect(try await client.file("\(cipher)").read() == content, "\(cipher)")
        }
        await client.close()
    }

    @Test("an AEGIS-256 file meeting a libsodium without AEGIS-256 is cipherUnavailable, naming the libsodium it needs and the one linked",
          .enabled(if: !AEGIS256.isInLinkedLibsodium, "the linked libsodium has AEGIS-256"))
    func aegisFileMeetsOldLibsodium() async throws {
        let daemon = try DaemonProcess()
        var client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await client.file("aegis").write(Array("sealed elsewhere".utf8), protection: .none)
        await client.close()
        daemon.stop()
        try Self.relabel(try daemon.diskPath("aegis"), name: "aegis", as: .aegis256,
                         size: "sealed elsewhere".utf8.count, stateDirectory: daemon.stateDirectory)

        try daemon.start()
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let error = await EndToEnd.error { _ = try await client.file("aegis").read() }
        #expect(error?.code == .cipherUnavailable)
        let needed = "aegis-256 needs libsodium 1.0.19 or later (this protd links \(SodiumRuntime.version))"
        #expect(error?.message.contains(needed) == true, "\(String(describing: error))")
        await client.close()
        let refused = try CommandRunner.run(Self.protctl, ["--socket", daemon.socketPath, "read", "aegis"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains(needed), "\(refused.stderr)")
    }

    /// Gives the file at `path` a genuine header for `cipher` (a new file key
    /// wrapped with the state directory's class keys, and its tag), as a
    /// protd that runs `cipher` would have written it, and the length that
    /// cipher's segments of `size` plaintext bytes take; the segment bytes
    /// stay as they were, since no one gets past the header.
    private static func relabel(_ path: String, name: String, as cipher: ContentCipher, size: Int, stateDirectory: String) throws {
        let secret = try DeviceSecret.load(from: .file(path: stateDirectory + "/device-key"))
        let keyBag = try KeyBag(path: stateDirectory + "/keybag", deviceSecret: secret)
        defer { keyBag.wipe() }
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let binding = FileBinding(try FileName(name), in: Namespace(uid: getuid()))
        let old = try FileHeader.decode(Array(bytes[..<FileHeader.byteCount]), binding: binding)
        let key = try FileKey.generate(cipher: cipher)
        defer { key.wipe() }
        let header = try key.makeHeader(protection: old.protection, segmentSize: old.segmentSize, fileID: old.fileID,
                                        binding: binding, keys: keyBag.keys)
        bytes.replaceSubrange(..<FileHeader.byteCount, with: header.encoded)
        let length = SegmentLayout(segmentSize: old.segmentSize, cipher: cipher).fileLength(forSize: size)
        bytes = Array(bytes.prefix(length)) + [UInt8](repeating: 0, count: max(0, length - bytes.count))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
}
