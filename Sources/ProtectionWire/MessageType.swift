public import NIOCore

/// The type byte of every frame (docs/PROTOCOL.md lists each one's fields).
/// Requests are below 0x80, responses 0x80-0xBF, events 0xC0 and above.
public enum MessageType: UInt8, Sendable, CaseIterable {
    // Requests (client to daemon).
    case hello = 0x01
    case status = 0x02
    case lock = 0x03
    case unlock = 0x04
    case passwd = 0x05
    case erase = 0x06
    case writeBegin = 0x07
    case writeChunk = 0x08
    case writeEnd = 0x09
    case read = 0x0A
    case open = 0x0B
    case handleRead = 0x0C
    case handleWrite = 0x0D
    case handleAppend = 0x0E
    case handleTruncate = 0x0F
    case handleSize = 0x10
    case handleClose = 0x11
    case getProtection = 0x12
    case setProtection = 0x13
    case list = 0x14
    case stat = 0x15
    case delete = 0x16
    case subscribe = 0x17
    case acknowledge = 0x18
    case handleSync = 0x19
    case writeAbort = 0x1A
    // 0x1B was writeDirect in protocol version 1; it is not used.
    // Recovery key (protocol version 3).
    case recoveryCreate = 0x1C
    case recoveryRemove = 0x1D
    case recoveryReset = 0x1E
    case loginUnlock = 0x1F
    /// Admin: check the store on disk, changing nothing.
    case check = 0x20

    // Responses (daemon to client).
    case ok = 0x80
    case helloAccepted = 0x81
    case statusReport = 0x82
    case size = 0x83
    case handleOpened = 0x84
    case protection = 0x85
    case attributes = 0x86
    case data = 0x87
    case dataChunk = 0x88
    case end = 0x89
    case listChunk = 0x8A
    case subscribed = 0x8B
    case recoveryKey = 0x8C
    case checkReport = 0x8D
    case error = 0x8F

    // Events (daemon to subscribed client, request id 0).
    case event = 0xC0
}

/// Protocol constants.
public enum WireProtocol {
    /// The protocol version this code speaks: 3. Version 2 had no lock
    /// reasons, no first-unlock timeout and no recovery key (its requests,
    /// and `recovery key set` in the status); version 1 also had
    /// `writeDirect`, a write whose chunks the daemon read from the socket
    /// itself.
    public static let version: UInt16 = 3
    /// The length of a recovery key on the wire.
    public static let recoveryKeyByteCount = 32
    /// The largest content chunk either side puts in one frame, where the
    /// daemon's frame limit has room for it (the default limit does; the
    /// smallest holds `minimumChunkSize`): see `chunkSize(forFrameLimit:)`,
    /// and PROTOCOL.md section 8.1 for why 512 KiB.
    public static let chunkSize = 512 * 1024
    /// The chunk the smallest frame limit holds.
    public static let minimumChunkSize = 256 * 1024
    /// The smallest frame limit a daemon may announce: the smallest chunk
    /// plus room for the fields around it (a `listChunk` is kept below it too).
    public static let minimumFrameLength = minimumChunkSize + 4096
    /// Room kept for the fields around a data chunk in one frame.
    public static let chunkFrameOverhead = 64

    /// Chunks are whole multiples of this (the default segment size), so a
    /// chunk read or written decrypts or seals whole segments only.
    public static let chunkAlignment = 64 * 1024

    /// The content chunk both sides use under a daemon frame limit of
    /// `limit` bytes: `chunkSize`, or less when the limit is lower, rounded
    /// down to `chunkAlignment` (at least `minimumChunkSize` for any limit a
    /// daemon may announce).
    public static func chunkSize(forFrameLimit limit: Int) -> Int {
        let fitting = min(chunkSize, limit - chunkFrameOverhead)
        return fitting >= minimumChunkSize ? fitting / chunkAlignment * chunkAlignment : fitting
    }
    /// Entries per `listChunk`: 128 maximal entries stay under the limit.
    public static let listChunkEntries = 128
    /// `read` length meaning "to the end of the file".
    public static let toEnd = UInt64.max

    /// Socket send buffer both sides ask for: room for several chunks in
    /// flight, where the Linux default (208 KiB) holds less than one.
    public static let socketBufferBytes = 2 << 20

    /// Receive buffers that start small (an idle or event-only connection
    /// costs little) and grow to 1 MiB for bulk transfers, so a chunk's
    /// frame usually arrives in one read instead of being stitched from
    /// 64 KiB ones.
    public static var receiveBufferAllocator: AdaptiveRecvByteBufferAllocator {
        AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 1 << 20)
    }
}
