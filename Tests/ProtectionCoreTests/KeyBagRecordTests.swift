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
        var body = Array(bytes[..<(KeyBagRecord.encodedByteCount - KeyBagRecord.macByteCount)])
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

    @Test("a flag bit other than bit 0 is refused as keyBagCorrupt")
    func unknownFlag() throws {
        let bytes = try resealed(try record.encode(macKey: macKey)) { $0[6] |= 2 }
        #expect(refusal(bytes) == .keyBagCorrupt)
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
