import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// Finding F1 with the real daemon: a key bag saved before the first
/// passcode, put back in place, starts protd with no passcode but reads
/// none of the class A, B and C files.
@Suite("First passcode end to end", .serialized)
struct FirstPasscodeEndToEndTests {
    private let guarded: [ProtectionClass] = [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication]

    @Test("a key bag saved before the first passcode and restored reads no class A, B or C file")
    func restoredKeyBag() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let keyBag = URL(fileURLWithPath: daemon.stateDirectory + "/keybag")
        var client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        for protection in guarded {
            try await client.file("before-\(protection)").write(Array("before".utf8), protection: protection)
        }
        let saved = try Data(contentsOf: keyBag)
        try await client.setPasscode("first passcode")
        for protection in guarded {
            try await client.file("after-\(protection)").write(Array("after".utf8), protection: protection)
        }
        try await client.file("plain").write(Array("plain".utf8), protection: ProtectionClass.none)
        await client.close()
        daemon.stop()

        try saved.write(to: keyBag)
        try daemon.start()
        client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let status = try await client.status()
        #expect(status.state == .unlocked && !status.passcodeSet, "the saved key bag has no passcode")
        for prefix in ["before", "after"] {
            for protection in guarded {
                let failure = await EndToEnd.failure { _ = try await client.file("\(prefix)-\(protection)").read() }
                #expect(failure == .integrityFailure, "\(prefix)-\(protection)")
            }
        }
        #expect(try await client.file("plain").read() == Array("plain".utf8), "class D never needed a passcode")
        await client.close()
    }
}
