public import NIOCore
internal import ProtectionModel

/// Zeroing what the daemon received or sent once it is done with it: file
/// content and passcodes must not stay in freed memory (docs/SECURITY.md).
extension ByteBuffer {
    /// Zeroes bytes `range` (indices as `getBytes` takes them) in the
    /// storage this buffer shares with its slices and copies; for bytes
    /// nobody reads again (`Zeroing.wipeShared(_:)`).
    public func wipeBytes(_ range: Range<Int>) {
        guard !range.isEmpty else { return }
        withVeryUnsafeBytes { Zeroing.wipeShared(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// Zeroes the readable bytes (`wipeBytes(_:)`).
    public func wipeReadableBytes() {
        wipeBytes(readerIndex..<writerIndex)
    }
}

extension Frame {
    /// Whether the frame carries file content or a secret: `data`,
    /// `dataChunk` and `recoveryKey` answers (requests with content are
    /// wiped once served instead).
    public var carriesContent: Bool {
        type == MessageType.data.rawValue || type == MessageType.dataChunk.rawValue
            || type == MessageType.recoveryKey.rawValue
    }

    /// Zeroes body and tail in place, once the frame was served or sent.
    public func wipeContent() {
        body.wipeReadableBytes()
        tail?.wipeReadableBytes()
    }
}

extension Request {
    /// Zeroes the passcodes (and recovery key) an `unlock`, `passwd` or
    /// recovery request carries, in the storage every copy of the request
    /// shares; other requests carry none.
    public func wipePasscodes() {
        switch self {
        case .unlock(let passcode), .loginUnlock(_, let passcode):
            Zeroing.wipeShared(passcode)
        case .passwd(let old, let new):
            Zeroing.wipeShared(old ?? [])
            Zeroing.wipeShared(new)
        case .recoveryCreate(let passcode):
            Zeroing.wipeShared(passcode)
        case .recoveryReset(let recoveryKey, let newPasscode):
            Zeroing.wipeShared(recoveryKey)
            Zeroing.wipeShared(newPasscode)
        default:
            break
        }
    }
}
