@testable import ProtectionCore
import Sodium
import Testing

@Suite("Key bag record: what a reader refuses even under a valid MAC")
struct KeyBagRecordTests {
    private let macKey = try! SecretBytes.random(count: 32)

    private var record: KeyBagRecord {
        let wrapped = [UInt8](repeating: 7, count: KeyBagRecord.wrappedKeyByteCount)
        return KeyBagRecord(hasPasscode: false, salt: [UInt8](repeating: 1, count: Argon2id.saltByteCount),
                            cost: .minimum, classBPublicKey: [UInt8](repeating: 2, count: 32), wrappedA: wrapped,
                            wrappedBPrivate: wrapped, wrappedC: wrapped, wrappedD: wrapped, failedAttempts: 0,
                            lastAttemptAt: 0)
    }

    /// `bytes` with `edit` applied to the record part and the MAC made again.
    private func resealed(_ bytes: [UInt8], _ edit: (inout [UInt8]) -> Void) throws -> [UInt8] {
        var body = Array(bytes[..<(bytes.count - KeyBagRecord.macByteCount)])
        edit(&body)
        return body + (try KeyedBlake2b.mac(key: macKey, parts: [body], length: KeyBagRecord.macByteCount))
    }

    private func refusal(_ bytes: [UInt8]) -> ProtectionError.Code? {
        do {
            _ = try KeyBagRecord.decode(bytes, macKey: macKey)
            return nil
        } catch let error as ProtectionError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test("a well-formed record reads back as written")
    func roundTrip() throws {
        #expect(try KeyBagRecord.decode(try record.encode(macKey: macKey), macKey: macKey) == record)
    }

    @Test("a record resealed without an edit still reads (the tests below reseal the way protd does)")
    func resealedUnchanged() throws {
        let bytes = try resealed(try record.encode(macKey: macKey)) { _ in }
        #expect(try KeyBagRecord.decode(bytes, macKey: macKey) == record)
    }

    @Test("a flag bit other than bits 0 and 1 is refused as keyBagCorrupt")
    func unknownFlag() throws {
        let bytes = try resealed(try record.encode(macKey: macKey)) { $0[6] |= 4 }
        #expect(refusal(bytes) == .keyBagCorrupt)
    }

    @Test("flag bit 1 (previous keys) must match the size, needs a passcode, and does not exist in version 1")
    func previousKeysFlag() throws {
        var withPrevious = record
        withPrevious.hasPasscode = true
        withPrevious.previousWrapped = [UInt8](repeating: 9, count: 3 * KeyBagRecord.wrappedKeyByteCount)
        let encoded = try withPrevious.encode(macKey: macKey)
        #expect(encoded.count == KeyBagRecord.withPreviousByteCount)
        #expect(try KeyBagRecord.decode(encoded, macKey: macKey) == withPrevious)
        // The flag without the bytes, the bytes without the flag, the flag without a passcode.
        #expect(refusal(try resealed(try record.encode(macKey: macKey)) { $0[6] |= 2 }) == .keyBagCorrupt)
        #expect(refusal(try resealed(encoded) { $0[6] &= ~2 }) == .keyBagCorrupt)
        #expect(refusal(try resealed(encoded) { $0[6] &= ~1 }) == .keyBagCorrupt)
        // Version 1 knows only bit 0.
        var first = record
        first.version = 1
        #expect(try KeyBagRecord.decode(try first.encode(macKey: macKey), macKey: macKey) == first)
        #expect(refusal(try resealed(try first.encode(macKey: macKey)) { $0[6] |= 2 }) == .keyBagCorrupt)
    }

    @Test("flag bit 2 (recovery) reads back alone and with bit 1, at the sizes docs/FORMAT.md gives")
    func recoveryFlag() throws {
        var both = record
        both.hasPasscode = true
        both.recoveryWrapped = [UInt8](repeating: 5, count: KeyBagRecord.recoveryByteCount)
        #expect(try both.encode(macKey: macKey).count == 660)
        #expect(try KeyBagRecord.decode(try both.encode(macKey: macKey), macKey: macKey) == both)
        both.previousWrapped = [UInt8](repeating: 9, count: KeyBagRecord.previousByteCount)
        let encoded = try both.encode(macKey: macKey)
        #expect(encoded.count == 876)
        #expect(try KeyBagRecord.decode(encoded, macKey: macKey) == both)
        #expect(refusal(try resealed(encoded) { $0[6] &= ~4 }) == .keyBagCorrupt)
    }

    @Test("version 2 binds wrapped keys to magic, version, salt and cost, not to the flags or the public key")
    func associatedData() {
        var other = record
        other.classBPublicKey = [UInt8](repeating: 3, count: 32)
        other.hasPasscode = true
        #expect(other.associatedData(for: .complete) == record.associatedData(for: .complete))
        #expect(record.associatedData(for: .complete, previous: true) != record.associatedData(for: .complete))
        var first = record
        first.version = 1
        var firstOther = other
        firstOther.version = 1
        #expect(first.associatedData(for: .complete) != firstOther.associatedData(for: .complete))
    }

    @Test("a cost Argon2id refuses (0 operations) is keyBagCorrupt when read, not at the first unlock")
    func unusableCost() throws {
        // Operations: u64 LE right after magic, version, flags and salt.
        let operations = 4 + 2 + 2 + Argon2id.saltByteCount
        let bytes = try resealed(try record.encode(macKey: macKey)) { body in
            for index in operations..<(operations + 8) { body[index] = 0 }
        }
        #expect(refusal(bytes) == .keyBagCorrupt)
    }
}
