internal import NIOCore
public import ProtectionModel

/// Field encodings shared by every message: integers are big endian,
/// strings are `u16 length | UTF-8`, byte strings are `u32 length | bytes`.
extension ByteBuffer {
    mutating func writeWireString(_ string: String) {
        let utf8 = Array(string.utf8)
        writeInteger(UInt16(clamping: utf8.count), endianness: .big)
        writeBytes(utf8.prefix(Int(UInt16.max)))
    }

    mutating func writeWireBytes(_ bytes: some Collection<UInt8>) {
        writeInteger(UInt32(bytes.count), endianness: .big)
        writeBytes(bytes)
    }

    mutating func writeWireBuffer(_ buffer: ByteBuffer) {
        var copy = buffer
        writeInteger(UInt32(copy.readableBytes), endianness: .big)
        writeBuffer(&copy)
    }

    mutating func readWireInteger<T: FixedWidthInteger>(_ field: String, as: T.Type = T.self) throws -> T {
        guard let value = readInteger(endianness: .big, as: T.self) else {
            throw ProtocolViolation("message ends before its \(field) field")
        }
        return value
    }

    mutating func readWireString(_ field: String) throws -> String {
        let length: UInt16 = try readWireInteger("\(field) length")
        guard let bytes = readBytes(length: Int(length)) else { throw ProtocolViolation("message ends inside \(field)") }
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw ProtocolViolation("\(field) is not valid UTF-8")
        }
        return string
    }

    mutating func readWireBytes(_ field: String) throws -> [UInt8] {
        let length: UInt32 = try readWireInteger("\(field) length")
        guard let bytes = readBytes(length: Int(length)) else { throw ProtocolViolation("message ends inside \(field)") }
        return bytes
    }

    mutating func readWireBytes(count: Int, _ field: String) throws -> [UInt8] {
        guard let bytes = readBytes(length: count) else { throw ProtocolViolation("message ends inside \(field)") }
        return bytes
    }

    mutating func readWireBuffer(_ field: String) throws -> ByteBuffer {
        let length: UInt32 = try readWireInteger("\(field) length")
        guard let slice = readSlice(length: Int(length)) else { throw ProtocolViolation("message ends inside \(field)") }
        return slice
    }

    mutating func readWireBool(_ field: String) throws -> Bool {
        switch try readWireInteger(field, as: UInt8.self) {
        case 0: return false
        case 1: return true
        case let other: throw ProtocolViolation("\(field) must be 0 or 1, got \(other)")
        }
    }

    mutating func readWireProtection(_ field: String = "protection class") throws -> ProtectionClass {
        let raw: UInt8 = try readWireInteger(field)
        guard let value = ProtectionClass(rawValue: raw) else { throw ProtocolViolation("unknown \(field) \(raw)") }
        return value
    }

    /// A lock reason byte, 1 to 4.
    mutating func readWireLockReason() throws -> LockReason {
        guard let reason = try readWireOptionalLockReason() else { throw ProtocolViolation("lock reason 0 (none) in a lock") }
        return reason
    }

    /// A lock reason byte, or 0 for none.
    mutating func readWireOptionalLockReason() throws -> LockReason? {
        let raw: UInt8 = try readWireInteger("lock reason")
        if raw == 0 { return nil }
        guard let reason = LockReason(wireValue: raw) else { throw ProtocolViolation("unknown lock reason \(raw)") }
        return reason
    }

    mutating func readWireLockState() throws -> LockState {
        let raw: UInt8 = try readWireInteger("lock state")
        guard let state = LockState(wireValue: raw) else { throw ProtocolViolation("unknown lock state \(raw)") }
        return state
    }

    /// Fails when bytes are left over after the last field.
    func expectFullyRead(_ type: @autoclosure () -> String) throws {
        if readableBytes != 0 {
            throw ProtocolViolation("\(readableBytes) unexpected bytes after the fields of \(type())")
        }
    }
}

extension LockReason {
    /// The byte for this reason on the wire (0 stands for none).
    public var wireValue: UInt8 {
        switch self {
        case .requested: 1
        case .inactivity: 2
        case .suspend: 3
        case .shutdown: 4
        }
    }

    /// The reason a wire byte stands for.
    public init?(wireValue: UInt8) {
        guard let reason = Self.allCases.first(where: { $0.wireValue == wireValue }) else { return nil }
        self = reason
    }
}

extension LockState {
    /// The byte for this state on the wire.
    public var wireValue: UInt8 {
        switch self {
        case .beforeFirstUnlock: 1
        case .unlocked: 2
        case .locking: 3
        case .locked: 4
        }
    }

    /// The state a wire byte stands for.
    public init?(wireValue: UInt8) {
        switch wireValue {
        case 1: self = .beforeFirstUnlock
        case 2: self = .unlocked
        case 3: self = .locking
        case 4: self = .locked
        default: return nil
        }
    }
}
