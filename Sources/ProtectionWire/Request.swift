public import NIOCore
public import ProtectionModel

/// Everything a client can ask (docs/PROTOCOL.md, "Requests").
public enum Request: Sendable, Equatable {
    /// First frame of a connection: the versions the client speaks.
    case hello(minimumVersion: UInt16, maximumVersion: UInt16, client: String)
    /// Lock state and failed-attempt record.
    case status
    /// Start a lock; `grace` nil = the configured grace period. With
    /// `waitUntilLocked` the answer comes once the state is `locked`.
    /// `reason` goes into the lock's events.
    case lock(graceMilliseconds: UInt32?, waitUntilLocked: Bool, reason: LockReason)
    /// Unlock with the passcode's UTF-8 bytes.
    case unlock(passcode: [UInt8])
    /// Unlock at the login of `uid` (docs/pam.md): a wrong passcode counts
    /// against that user's own failed attempts, not the machine's.
    case loginUnlock(uid: UInt32, passcode: [UInt8])
    /// Set (old nil) or change the passcode.
    case passwd(old: [UInt8]?, new: [UInt8])
    /// Crypto-shred everything.
    case erase
    /// Start a whole-file write; chunks follow, then `writeEnd`.
    case writeBegin(name: String, protection: ProtectionClass, durable: Bool)
    /// Content for the write in progress with the same request id.
    case writeChunk(ByteBuffer)
    /// Commit the write in progress: atomically replaces the file.
    case writeEnd
    /// Abandon the write in progress; the old content stays.
    case writeAbort
    /// Read `length` bytes from `offset` (`WireProtocol.toEnd` = all); the
    /// answer streams as `dataChunk` frames then `end`.
    case read(name: String, offset: UInt64, length: UInt64)
    /// Open a handle.
    case open(name: String, mode: WireOpenMode, protection: ProtectionClass)
    /// Read up to `length` (at most one chunk) at `offset`.
    case handleRead(handle: UInt32, offset: UInt64, length: UInt32)
    /// Write at `offset`.
    case handleWrite(handle: UInt32, offset: UInt64, data: ByteBuffer)
    /// Write at the end.
    case handleAppend(handle: UInt32, data: ByteBuffer)
    /// Cut or zero-extend.
    case handleTruncate(handle: UInt32, size: UInt64)
    /// Current size.
    case handleSize(handle: UInt32)
    /// fsync the handle's file.
    case handleSync(handle: UInt32)
    /// Close the handle.
    case handleClose(handle: UInt32)
    /// A file's class.
    case getProtection(name: String)
    /// Change a file's class (rewraps its key).
    case setProtection(name: String, protection: ProtectionClass)
    /// Files whose name starts with `prefix`; answer: `listChunk`s then `end`.
    case list(prefix: String)
    /// One file's attributes.
    case stat(name: String)
    /// Delete a file.
    case delete(name: String)
    /// Receive events on this connection from now on.
    case subscribe
    /// Acknowledge the `willBecomeUnavailable` event with this sequence.
    case acknowledge(sequence: UInt64)
    /// Make a recovery key, given the current passcode; answer: `recoveryKey`.
    case recoveryCreate(passcode: [UInt8])
    /// Delete the recovery key.
    case recoveryRemove
    /// Set a new passcode with the recovery key (`WireProtocol.recoveryKeyByteCount` bytes).
    case recoveryReset(recoveryKey: [UInt8], newPasscode: [UInt8])
    /// Check the store on disk, changing nothing; answer: `checkReport`.
    case check

    /// The type byte of this request.
    public var type: MessageType {
        switch self {
        case .hello: .hello
        case .status: .status
        case .lock: .lock
        case .unlock: .unlock
        case .loginUnlock: .loginUnlock
        case .passwd: .passwd
        case .erase: .erase
        case .writeBegin: .writeBegin
        case .writeChunk: .writeChunk
        case .writeEnd: .writeEnd
        case .writeAbort: .writeAbort
        case .read: .read
        case .open: .open
        case .handleRead: .handleRead
        case .handleWrite: .handleWrite
        case .handleAppend: .handleAppend
        case .handleTruncate: .handleTruncate
        case .handleSize: .handleSize
        case .handleSync: .handleSync
        case .handleClose: .handleClose
        case .getProtection: .getProtection
        case .setProtection: .setProtection
        case .list: .list
        case .stat: .stat
        case .delete: .delete
        case .subscribe: .subscribe
        case .acknowledge: .acknowledge
        case .recoveryCreate: .recoveryCreate
        case .recoveryRemove: .recoveryRemove
        case .recoveryReset: .recoveryReset
        case .check: .check
        }
    }

    /// The frame for this request with `requestID`.
    public func frame(requestID: UInt32) -> Frame {
        var body = ByteBufferAllocator().buffer(capacity: 32)
        switch self {
        case .hello(let minimum, let maximum, let client):
            body.writeInteger(minimum, endianness: .big)
            body.writeInteger(maximum, endianness: .big)
            body.writeWireString(client)
        case .status, .erase, .writeEnd, .writeAbort, .subscribe, .recoveryRemove, .check:
            break
        case .lock(let grace, let wait, let reason):
            body.writeInteger(UInt8((grace == nil ? 0 : 1) | (wait ? 2 : 0)))
            body.writeInteger(grace ?? 0, endianness: .big)
            body.writeInteger(reason.wireValue)
        case .unlock(let passcode):
            body.writeWireBytes(passcode)
        case .loginUnlock(let uid, let passcode):
            body.writeInteger(uid, endianness: .big)
            body.writeWireBytes(passcode)
        case .passwd(let old, let new):
            body.writeInteger(UInt8(old == nil ? 0 : 1))
            body.writeWireBytes(old ?? [])
            body.writeWireBytes(new)
        case .writeBegin(let name, let protection, let durable):
            body.writeWireString(name)
            body.writeInteger(protection.rawValue)
            body.writeInteger(UInt8(durable ? 1 : 0))
        case .writeChunk(let data):
            return contentFrame(requestID: requestID, fields: body, content: data)
        case .read(let name, let offset, let length):
            body.writeWireString(name)
            body.writeInteger(offset, endianness: .big)
            body.writeInteger(length, endianness: .big)
        case .open(let name, let mode, let protection):
            body.writeWireString(name)
            body.writeInteger(mode.rawValue)
            body.writeInteger(protection.rawValue)
        case .handleRead(let handle, let offset, let length):
            body.writeInteger(handle, endianness: .big)
            body.writeInteger(offset, endianness: .big)
            body.writeInteger(length, endianness: .big)
        case .handleWrite(let handle, let offset, let data):
            body.writeInteger(handle, endianness: .big)
            body.writeInteger(offset, endianness: .big)
            return contentFrame(requestID: requestID, fields: body, content: data)
        case .handleAppend(let handle, let data):
            body.writeInteger(handle, endianness: .big)
            return contentFrame(requestID: requestID, fields: body, content: data)
        case .handleTruncate(let handle, let size):
            body.writeInteger(handle, endianness: .big)
            body.writeInteger(size, endianness: .big)
        case .handleSize(let handle), .handleSync(let handle), .handleClose(let handle):
            body.writeInteger(handle, endianness: .big)
        case .getProtection(let name), .stat(let name), .delete(let name):
            body.writeWireString(name)
        case .setProtection(let name, let protection):
            body.writeWireString(name)
            body.writeInteger(protection.rawValue)
        case .list(let prefix):
            body.writeWireString(prefix)
        case .acknowledge(let sequence):
            body.writeInteger(sequence, endianness: .big)
        case .recoveryCreate(let passcode):
            body.writeWireBytes(passcode)
        case .recoveryReset(let recoveryKey, let newPasscode):
            body.writeBytes(recoveryKey)
            body.writeWireBytes(newPasscode)
        }
        return Frame(type: type.rawValue, requestID: requestID, body: body)
    }

    /// The frame of this request, which carries file content: `fields`, then
    /// the content's length in the body, and the content itself as the
    /// frame's tail, sent from the buffer it is in without being copied
    /// behind the fields.
    private func contentFrame(requestID: UInt32, fields: ByteBuffer, content: ByteBuffer) -> Frame {
        var body = fields
        body.writeInteger(UInt32(content.readableBytes), endianness: .big)
        return Frame(type: type.rawValue, requestID: requestID, body: body, tail: content)
    }

    /// Parses a request frame; throws `ProtocolViolation` for an unknown
    /// type, a missing field or trailing bytes.
    public init(frame: Frame) throws {
        guard let type = MessageType(rawValue: frame.type), type.rawValue < 0x80 else {
            throw ProtocolViolation("unknown request type 0x\(String(frame.type, radix: 16))")
        }
        var body = frame.wholeBody
        // Passcodes read before a later field fails are zeroed with the error.
        var secrets: [[UInt8]] = []
        func secret(_ bytes: [UInt8]) -> [UInt8] {
            secrets.append(bytes)
            return bytes
        }
        do {
            switch type {
            case .hello:
                self = .hello(minimumVersion: try body.readWireInteger("minimum version"),
                              maximumVersion: try body.readWireInteger("maximum version"),
                              client: try body.readWireString("client name"))
            case .status: self = .status
            case .erase: self = .erase
            case .writeEnd: self = .writeEnd
            case .writeAbort: self = .writeAbort
            case .subscribe: self = .subscribe
            case .recoveryRemove: self = .recoveryRemove
            case .check: self = .check
            case .lock:
                let flags: UInt8 = try body.readWireInteger("lock flags")
                let grace: UInt32 = try body.readWireInteger("grace")
                guard flags & ~3 == 0 else { throw ProtocolViolation("unknown lock flags \(flags)") }
                self = .lock(graceMilliseconds: flags & 1 == 1 ? grace : nil, waitUntilLocked: flags & 2 == 2,
                             reason: try body.readWireLockReason())
            case .unlock:
                self = .unlock(passcode: secret(try body.readWireBytes("passcode")))
            case .loginUnlock:
                self = .loginUnlock(uid: try body.readWireInteger("uid"), passcode: secret(try body.readWireBytes("passcode")))
            case .passwd:
                let hasOld = try body.readWireBool("has old passcode")
                let old = secret(try body.readWireBytes("old passcode"))
                // An old passcode sent without its flag is never used; it is zeroed here, as nothing else holds it.
                if !hasOld { Zeroing.wipeShared(old) }
                self = .passwd(old: hasOld ? old : nil, new: secret(try body.readWireBytes("new passcode")))
            case .writeBegin:
                self = .writeBegin(name: try body.readWireString("name"), protection: try body.readWireProtection(),
                                   durable: try body.readWireBool("durable"))
            case .writeChunk:
                self = .writeChunk(try body.readWireBuffer("data"))
            case .read:
                self = .read(name: try body.readWireString("name"), offset: try body.readWireInteger("offset"),
                             length: try body.readWireInteger("length"))
            case .open:
                let name = try body.readWireString("name")
                let rawMode: UInt8 = try body.readWireInteger("open mode")
                guard let mode = WireOpenMode(rawValue: rawMode) else { throw ProtocolViolation("unknown open mode \(rawMode)") }
                self = .open(name: name, mode: mode, protection: try body.readWireProtection())
            case .handleRead:
                self = .handleRead(handle: try body.readWireInteger("handle"), offset: try body.readWireInteger("offset"),
                                   length: try body.readWireInteger("length"))
            case .handleWrite:
                self = .handleWrite(handle: try body.readWireInteger("handle"), offset: try body.readWireInteger("offset"),
                                    data: try body.readWireBuffer("data"))
            case .handleAppend:
                self = .handleAppend(handle: try body.readWireInteger("handle"), data: try body.readWireBuffer("data"))
            case .handleTruncate:
                self = .handleTruncate(handle: try body.readWireInteger("handle"), size: try body.readWireInteger("size"))
            case .handleSize: self = .handleSize(handle: try body.readWireInteger("handle"))
            case .handleSync: self = .handleSync(handle: try body.readWireInteger("handle"))
            case .handleClose: self = .handleClose(handle: try body.readWireInteger("handle"))
            case .getProtection: self = .getProtection(name: try body.readWireString("name"))
            case .stat: self = .stat(name: try body.readWireString("name"))
            case .delete: self = .delete(name: try body.readWireString("name"))
            case .setProtection:
                self = .setProtection(name: try body.readWireString("name"), protection: try body.readWireProtection())
            case .list: self = .list(prefix: try body.readWireString("prefix"))
            case .acknowledge: self = .acknowledge(sequence: try body.readWireInteger("sequence"))
            case .recoveryCreate: self = .recoveryCreate(passcode: secret(try body.readWireBytes("passcode")))
            case .recoveryReset:
                let recoveryKey = secret(try body.readWireBytes(count: WireProtocol.recoveryKeyByteCount, "recovery key"))
                self = .recoveryReset(recoveryKey: recoveryKey, newPasscode: secret(try body.readWireBytes("new passcode")))
            default:
                throw ProtocolViolation("unknown request type 0x\(String(frame.type, radix: 16))")
            }
            try body.expectFullyRead(String(describing: type))
        } catch {
            for bytes in secrets { Zeroing.wipeShared(bytes) }
            throw error
        }
    }
}
