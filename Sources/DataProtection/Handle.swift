public import ProtectionModel
internal import NIOCore
internal import ProtectionWire
internal import Synchronization

extension ProtectedFile {
    /// An open file for random access, from `ProtectedFile.open`.
    ///
    /// Requests larger than the connection's `maximumChunkSize` are split
    /// into pieces. A handle belongs to its connection and dies with it
    /// (calls then fail as the connection's calls do: `.daemonUnavailable`,
    /// or `.clientClosed` after `close()`). When a lock completes, a class
    /// `.complete` handle is invalidated and fails with
    /// `.protectedDataUnavailable` (an `erase` invalidates every handle);
    /// it still counts against the daemon's handle limit until closed. A
    /// `.completeUnlessOpen` handle keeps working after a lock. Close a
    /// handle when done; one that is released open is closed in the background.
    public final class Handle: Sendable {
        /// The name of the file it was opened on.
        public let name: String
        /// The file's protection class when it was opened.
        public let protection: ProtectionClass

        let handle: UInt32
        let connection: Connection
        private let closed = Atomic<Bool>(false)

        init(name: String, handle: UInt32, protection: ProtectionClass, connection: Connection) {
            self.name = name
            self.handle = handle
            self.protection = protection
            self.connection = connection
        }

        deinit {
            if !closed.load(ordering: .acquiring) {
                connection.sendDetached(.handleClose(handle: handle))
            }
        }

        /// Whether `close()` was called.
        public var isClosed: Bool { closed.load(ordering: .acquiring) }

        /// Up to `count` bytes from `offset`; fewer only at the end of the file.
        public func read(offset: UInt64, count: Int) async throws(DataProtectionError) -> [UInt8] {
            try checkOpen()
            guard count >= 0 else { throw .invalidArgument("cannot read a negative number of bytes (\(count))") }
            guard count > 0 else { return [] }
            // At most `FileChunks.readAhead` chunk reads in flight, and memory
            // for what arrives: a count far past the end of the file (a
            // "read everything") costs no more than the file.
            let (end, overflow) = offset.addingReportingOverflow(UInt64(count))
            var reads = ReadAhead(handle: self, start: offset, end: overflow ? .max : end)
            var content: [UInt8] = []
            content.reserveCapacity(min(count, FileChunks.readAhead * connection.maximumChunkSize))
            while let piece = try await reads.next() { content.append(contentsOf: piece) }
            return content
        }

        /// Writes `data` at `offset`, extending the file if needed, and
        /// returns the file's new size. A write larger than one chunk goes
        /// out as pieces, pipelined, each at its own offset: if one fails,
        /// the call throws its error and the others may have been written.
        @discardableResult
        public func write(_ data: [UInt8], at offset: UInt64) async throws(DataProtectionError) -> UInt64 {
            try checkOpen()
            var answers: [PendingAnswer] = []
            var start = 0
            repeat {
                let end = min(start + connection.maximumChunkSize, data.count)
                let (position, overflow) = offset.addingReportingOverflow(UInt64(start))
                guard !overflow else { throw .invalidArgument("offset \(offset) plus \(data.count) bytes is past the largest file") }
                let content = ByteBuffer(bytes: data[start..<end])
                answers.append(try await connection.submit(.handleWrite(handle: handle, offset: position, data: content)))
                start = end
            } while start < data.count
            return try await Self.lastSize(of: answers, "handleWrite")
        }

        /// Appends `data` at the end of the file and returns its new size.
        /// A larger append than one chunk goes out a piece at a time, each
        /// sent once the one before it is written, so a failed piece (a
        /// full disk, the quota) ends the call and no later piece lands
        /// after a gap. Pieces are not atomic against other handles'
        /// appends, which may land between them.
        @discardableResult
        public func append(_ data: [UInt8]) async throws(DataProtectionError) -> UInt64 {
            try checkOpen()
            var size: UInt64 = 0
            var start = 0
            repeat {
                let end = min(start + connection.maximumChunkSize, data.count)
                let content = ByteBuffer(bytes: data[start..<end])
                size = try await Self.lastSize(of: [try await connection.submit(.handleAppend(handle: handle, data: content))],
                                               "handleAppend")
                start = end
            } while start < data.count
            return size
        }

        /// Cuts the file to `size` bytes or extends it with zeros; returns the new size.
        @discardableResult
        public func truncate(to size: UInt64) async throws(DataProtectionError) -> UInt64 {
            try checkOpen()
            return try await connection.expectSize(.handleTruncate(handle: handle, size: size), "handleTruncate")
        }

        /// The file's current size in bytes.
        public func size() async throws(DataProtectionError) -> UInt64 {
            try checkOpen()
            return try await connection.expectSize(.handleSize(handle: handle), "handleSize")
        }

        /// Makes the writes so far durable on disk.
        public func sync() async throws(DataProtectionError) {
            try checkOpen()
            try await connection.expectOK(.handleSync(handle: handle), "handleSync")
        }

        /// Closes the handle. Calling it again does nothing. It cannot fail:
        /// a handle the daemon no longer knows (invalidated by a lock, or its
        /// connection gone) is closed either way.
        public func close() async {
            guard closed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
            else { return }
            // A cancelled task cannot send: the close goes out on its own.
            guard !Task.isCancelled else { return connection.sendDetached(.handleClose(handle: handle)) }
            do {
                try await connection.expectOK(.handleClose(handle: handle), "handleClose")
            } catch .cancelled {
                // Cancelled while sending or waiting: close again to be sure
                // (a second close is answered handleClosed, and dropped).
                connection.sendDetached(.handleClose(handle: handle))
            } catch {
                // The connection is gone, and with it the handle.
            }
        }

        // MARK: Helpers

        private static func lastSize(of answers: [PendingAnswer], _ what: String) async throws(DataProtectionError) -> UInt64 {
            var size: UInt64 = 0
            for answer in answers {
                let frames = try await answer.frames()
                guard case .size(let newSize) = frames.first else {
                    throw frames.first.map { DataProtectionError.unexpected($0, to: what) }
                        ?? .protocolError("protd sent an empty answer to \(what)")
                }
                size = newSize
            }
            return size
        }

        fileprivate func checkOpen() throws(DataProtectionError) {
            if closed.load(ordering: .acquiring) {
                throw .handleClosed("the handle on \(name) was closed by this client")
            }
        }
    }
}

extension ProtectedFile.Handle {
    /// Sends one `handleRead` of at most one chunk.
    func submitRead(offset: UInt64, length: Int) async throws(DataProtectionError) -> PendingAnswer {
        try checkOpen()
        return try await connection.submit(.handleRead(handle: handle, offset: offset,
                                                       length: UInt32(clamping: length)))
    }

    /// The bytes of a `handleRead` answer.
    func data(of answer: PendingAnswer) async throws(DataProtectionError) -> [UInt8] {
        let frames = try await answer.frames()
        guard case .data(let data) = frames.first else {
            throw frames.first.map { DataProtectionError.unexpected($0, to: "handleRead") }
                ?? .protocolError("protd sent an empty answer to handleRead")
        }
        return data.readableByteArray
    }
}
