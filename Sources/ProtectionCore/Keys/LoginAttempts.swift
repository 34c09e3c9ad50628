internal import Sodium

/// Failed unlock attempts made at a login (docs/pam.md), counted per login
/// user instead of against the machine's one count: another user's
/// mistyped password must not delay (or erase) everyone. Stored in
/// `<state>/login-attempts` (docs/FORMAT.md, "Login attempts"), written
/// before each attempt is checked, as the key bag's count is.
struct LoginAttempts: Equatable {
    static let magic: [UInt8] = Array("PDLA".utf8)
    static let version: UInt16 = 1
    private static let macLabel = Array("protd.login-attempts.mac.v1".utf8)
    private static let entryByteCount = 16
    /// More login users than this with failures pending is not a login.
    static let maximumEntries = 65_536

    /// Users with at least one failure since their last success.
    var records: [UInt32: AttemptRecord] = [:]

    /// The file's bytes: magic, version, count, entries by uid, MAC.
    func encode(macKey: SecretBytes) throws -> [UInt8] {
        var bytes = Self.magic
        bytes.appendLittleEndian(Self.version)
        bytes.appendLittleEndian(UInt32(records.count))
        for (uid, record) in records.sorted(by: { $0.key < $1.key }) {
            bytes.appendLittleEndian(uid)
            bytes.appendLittleEndian(record.failures)
            bytes.appendLittleEndian(record.lastAttemptAt)
        }
        return bytes + (try KeyedBlake2b.mac(key: macKey, parts: [bytes], length: 32))
    }

    /// Parses and authenticates the file; `keyBagCorrupt` when it does not
    /// (`KeyBag` then starts the counts afresh: whoever could change the
    /// file could as well delete it).
    static func decode(_ bytes: [UInt8], macKey: SecretBytes) throws -> LoginAttempts {
        func corrupt(_ why: String) -> ProtectionError {
            ProtectionError(.keyBagCorrupt, "the login attempts file \(why); remove it to start counting afresh")
        }
        guard bytes.count >= 10 + 32 else { throw corrupt("is too short") }
        let body = Array(bytes[..<(bytes.count - 32)])
        guard KeyedBlake2b.tagsEqual(try KeyedBlake2b.mac(key: macKey, parts: [body], length: 32),
                                     Array(bytes[(bytes.count - 32)...])) else {
            throw corrupt("failed authentication")
        }
        var reader = ByteReader(body)
        guard reader.read(4) == magic, reader.readLittleEndian(UInt16.self) == version,
              let count: UInt32 = reader.readLittleEndian(), Int(count) * entryByteCount == reader.remaining else {
            throw corrupt("is not in a format this protd reads")
        }
        var attempts = LoginAttempts()
        for _ in 0..<count {
            let uid: UInt32 = reader.readLittleEndian()!
            attempts.records[uid] = AttemptRecord(failures: reader.readLittleEndian()!,
                                                  lastAttemptAt: reader.readLittleEndian()!)
        }
        return attempts
    }

    /// The MAC key: from the device secret, as the key bag's.
    static func macKey(deviceSecret: SecretBytes) throws -> SecretBytes {
        try KeyedBlake2b.deriveKey(key: deviceSecret, parts: [macLabel])
    }
}

/// Consecutive failed attempts and when the last one was (Unix seconds).
struct AttemptRecord: Equatable {
    var failures: UInt32
    var lastAttemptAt: Int64
}

/// Whose count an unlock attempt goes to.
public enum AttemptCounter: Sendable, Equatable {
    /// The machine's one count, in the key bag; erase-after-N applies.
    case machine
    /// A login user's own count (`LoginAttempts`), for unlocks at login.
    case login(uid: UInt32)
}

extension AttemptCounter {
    /// Says whose count a message is about ("" for the machine's).
    var whose: String {
        switch self {
        case .machine: ""
        case .login(let uid): " at login as uid \(uid)"
        }
    }
}
