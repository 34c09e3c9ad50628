public import ProtectionModel
internal import NIOCore
internal import ProtectionWire

/// A file in this user's namespace, by name. Making one sends nothing; each
/// method is one request (or one streamed exchange) with the daemon.
public struct ProtectedFile: Sendable {
    /// The file's name: a relative path such as `notes/today.txt`.
    public let name: String
    /// The client whose connection the requests use.
    public let client: DataProtectionClient

    var connection: Connection { client.connection }

    init(name: String, client: DataProtectionClient) {
        self.name = name
        self.client = client
    }

    // MARK: Whole-file writes

    /// Replaces the file's content atomically with `data`, creating the file
    /// in class `protection` if needed (an existing file is rewritten in
    /// `protection` too): after a crash the file has its old content or the
    /// new, as the daemon fsyncs the data before the rename. With `durable`
    /// it also fsyncs the directory before it answers, so the new content
    /// survives a crash; without, a crash may bring the old back. Returns the number of bytes written. Content larger than
    /// `maximumChunkSize` is streamed in chunks with backpressure (see
    /// `write(contentsOf:protection:durable:)`).
    @discardableResult
    public func write(_ data: [UInt8], protection: ProtectionClass = .default,
                      durable: Bool = true) async throws(DataProtectionError) -> UInt64 {
        if data.count <= connection.maximumChunkSize {
            return try await WriteSession.writeWhole(connection, name: name, protection: protection, durable: durable,
                                                     content: data[...])
        }
        var session = try await WriteSession.begin(connection, name: name, protection: protection, durable: durable)
        do {
            try await session.append(data[...])
            return try await session.finish()
        } catch {
            await session.abandon()
            throw error
        }
    }

    /// Replaces the file's content with the UTF-8 bytes of `text` (see `write(_:protection:durable:)`).
    @discardableResult
    public func write(_ text: String, protection: ProtectionClass = .default,
                      durable: Bool = true) async throws(DataProtectionError) -> UInt64 {
        try await write(Array(text.utf8), protection: protection, durable: durable)
    }

    /// Replaces the file's content with the bytes of `bytes` (see `write(_:protection:durable:)`).
    @discardableResult
    public func write(_ bytes: some Sequence<UInt8>, protection: ProtectionClass = .default,
                      durable: Bool = true) async throws(DataProtectionError) -> UInt64 {
        try await write(Array(bytes), protection: protection, durable: durable)
    }

    /// Replaces the file's content atomically with the concatenation of
    /// `chunks`, streaming. A source that ends within one chunk
    /// (`maximumChunkSize`) is sent as one whole write; a longer one as
    /// `maximumChunkSize` pieces on the client's connection, with at most a
    /// few on their way at a time: a slow daemon slows the source instead
    /// of filling memory. Sending suspends, never blocks a thread, and
    /// ends with `.cancelled` when the task is cancelled.
    ///
    /// If the source throws, the write is abandoned (the old content stays)
    /// and the source's error is rethrown; every other failure is a
    /// `DataProtectionError`. An error from the daemon stops the upload as
    /// soon as it is seen. Returns the number of bytes written.
    @discardableResult
    public func write<Chunks: AsyncSequence>(contentsOf chunks: Chunks, protection: ProtectionClass = .default,
                                             durable: Bool = true) async throws -> UInt64
        where Chunks.Element == [UInt8] {
        var source = chunks.makeAsyncIterator()
        var head: [UInt8] = []
        var crossing: [UInt8]?
        while let element = try await source.next() {
            guard head.count + element.count <= connection.maximumChunkSize else {
                crossing = element
                break
            }
            head += element
        }
        guard let crossing else { return try await write(head, protection: protection, durable: durable) }
        return try await writeStreamed(head + crossing, then: &source, protection: protection, durable: durable)
    }

    /// A streamed write (`WriteSession`): `first`, then the rest of `source`.
    private func writeStreamed<Source: AsyncIteratorProtocol>(
        _ first: [UInt8], then source: inout Source, protection: ProtectionClass, durable: Bool
    ) async throws -> UInt64 where Source.Element == [UInt8] {
        var session = try await WriteSession.begin(connection, name: name, protection: protection, durable: durable)
        var sinkError: DataProtectionError?
        do {
            var element: [UInt8]? = first
            while let chunk = element {
                do {
                    try await session.append(chunk[...])
                } catch {
                    sinkError = error
                    break
                }
                element = try await source.next()
            }
        } catch {
            await session.abandon()
            throw error
        }
        if let sinkError {
            await session.abandon()
            throw sinkError
        }
        do {
            return try await session.finish()
        } catch {
            await session.abandon()
            throw error
        }
    }

    // MARK: Whole-file and ranged reads

    /// How many times `read()` and `read(range:)` try when a handle keeps
    /// changing the file in place while they read (`fileChanged`).
    static let readAttempts = 3

    /// The file's whole content, as one version of it. For large files
    /// prefer `readChunks()`.
    public func read() async throws(DataProtectionError) -> [UInt8] {
        try await read(offset: 0, length: WireProtocol.toEnd)
    }

    /// The bytes in `range`; shorter when the range runs past the end of the file.
    public func read(range: Range<UInt64>) async throws(DataProtectionError) -> [UInt8] {
        try await read(offset: range.lowerBound, length: range.upperBound - range.lowerBound)
    }

    /// The whole content as UTF-8 text (invalid sequences are repaired).
    public func readString() async throws(DataProtectionError) -> String {
        String(decoding: try await read(), as: UTF8.self)
    }

    /// One version of the bytes asked for: a read that a handle's in-place
    /// write interrupted (`fileChanged`) is made again, `readAttempts` times
    /// in all.
    private func read(offset: UInt64, length: UInt64) async throws(DataProtectionError) -> [UInt8] {
        var attempt = 1
        while true {
            do {
                return try await readOnce(offset: offset, length: length)
            } catch .fileChanged(_) where attempt < Self.readAttempts {
                attempt += 1
            }
        }
    }

    private func readOnce(offset: UInt64, length: UInt64) async throws(DataProtectionError) -> [UInt8] {
        let request = Request.read(name: try WireText.name(name), offset: offset, length: length)
        let frames = try await connection.exchange(request, shape: .untilEnd)
        var content: [UInt8] = []
        content.reserveCapacity(frames.reduce(0) { total, frame in
            if case .dataChunk(let data) = frame { return total + data.readableBytes }
            return total
        })
        for frame in frames {
            switch frame {
            case .dataChunk(let data): data.appendReadableBytes(to: &content)
            case .end: break
            default: throw .unexpected(frame, to: "read")
            }
        }
        return content
    }

    /// The content as a stream of chunks with backpressure (see `FileChunks`).
    public func readChunks() -> FileChunks {
        FileChunks(file: self, range: nil)
    }

    /// The bytes in `range` as a stream of chunks with backpressure (see `FileChunks`).
    public func readChunks(range: Range<UInt64>) -> FileChunks {
        FileChunks(file: self, range: range)
    }

    // MARK: Handles

    /// Opens a handle for random access (see `OpenMode`). Close it when done;
    /// it also dies with the connection, and a `.complete` file's handle
    /// is invalidated when the device locks.
    public func open(_ mode: OpenMode = .existing) async throws(DataProtectionError) -> Handle {
        let (wireMode, protection) = mode.wire
        let response = try await connection.single(.open(name: try WireText.name(name), mode: wireMode,
                                                         protection: protection))
        guard case .handleOpened(let handle, let actualProtection, _) = response else {
            throw .unexpected(response, to: "open")
        }
        return Handle(name: name, handle: handle, protection: actualProtection, connection: connection)
    }

    // MARK: Metadata

    /// The file's protection class.
    public var protection: ProtectionClass {
        get async throws(DataProtectionError) {
            let response = try await connection.single(.getProtection(name: try WireText.name(name)))
            guard case .protection(let protection) = response else { throw .unexpected(response, to: "getProtection") }
            return protection
        }
    }

    /// Moves the file to another class. Only its key is rewrapped, so this
    /// takes the same time whatever the file's size. Needs the old class's
    /// key (`.protectedDataUnavailable` otherwise).
    public func setProtection(_ protection: ProtectionClass) async throws(DataProtectionError) {
        try await connection.expectOK(.setProtection(name: try WireText.name(name), protection: protection),
                                      "setProtection")
    }

    /// Deletes the file. Works in every lock state.
    public func delete() async throws(DataProtectionError) {
        try await connection.expectOK(.delete(name: try WireText.name(name)), "delete")
    }

    /// The file's name, class, size and modification time. Works in every lock state.
    public var attributes: FileAttributes {
        get async throws(DataProtectionError) {
            let response = try await connection.single(.stat(name: try WireText.name(name)))
            guard case .attributes(let attributes) = response else { throw .unexpected(response, to: "stat") }
            return FileAttributes(attributes)
        }
    }

    /// Whether the file exists (a `stat` that answers `.notFound` means no).
    public var exists: Bool {
        get async throws(DataProtectionError) {
            do {
                _ = try await attributes
                return true
            } catch .notFound {
                return false
            }
        }
    }
}
