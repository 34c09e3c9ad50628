internal import Logging
internal import NIOCore
internal import ProtectionCore
internal import ProtectionWire
internal import Sodium

/// Serves one client: the hello, then requests in order, each answered with
/// its request id. Owns the client's handles, streamed writes and event
/// subscription, and releases them all when the connection ends, however
/// it ends. Errors stay within the connection.
final class Connection {
    private let peer: PeerCredentials
    private let context: ConnectionContext
    private let outbound: NIOAsyncChannelOutboundWriter<Frame>
    /// Where the hub writes this connection's events, once it subscribes.
    private let events: EventSinkReference
    private let logger: Logger
    private var handles: [UInt32: ProtectedFileHandle] = [:]
    private var nextHandle: UInt32 = 1
    private var writes: [UInt32: PendingWrite] = [:]
    /// Writes that already got their (error) answer; their remaining
    /// chunks and end are ignored.
    private var answeredWrites: Set<UInt32> = []
    private var subscription: SubscriberID?
    /// Whether a lock-and-wait left its answer with the controller.
    private var leftLockAnswers = false
    /// The connection's slot: a kept one serves administration only.
    private let slot: ConnectionSlots.Slot
    /// Handles and writes counted for this connection in the uid's
    /// holdings; brought down to what it holds after each request.
    private var countedFiles = 0
    /// Refusals for lack of permission logged for this connection: a client
    /// looping on refused requests must not flood the log (and push the
    /// lines that follow out of journald's rate limit).
    private var refusalsLogged = 0
    static let refusalsLoggedPerConnection = 8

    private var namespace: Namespace { Namespace(uid: peer.uid) }
    /// The largest content chunk in a data frame under this daemon's frame limit.
    private var chunkSize: Int { WireProtocol.chunkSize(forFrameLimit: context.maximumFrameLength) }

    init(peer: PeerCredentials, context: ConnectionContext, outbound: NIOAsyncChannelOutboundWriter<Frame>,
         events: EventSinkReference, slot: ConnectionSlots.Slot) {
        self.peer = peer
        self.slot = slot
        self.context = context
        self.outbound = outbound
        self.events = events
        var logger = context.logger
        logger[metadataKey: "protd.peer.uid"] = "\(peer.uid)"
        logger[metadataKey: "protd.peer.pid"] = "\(peer.pid)"
        self.logger = logger
    }

    /// Runs until the client disconnects or breaks the protocol.
    func run(inbound: NIOAsyncChannelInboundStream<Frame>) async {
        logger.debug("client connected")
        do {
            var frames = inbound.makeAsyncIterator()
            if let first = try await frames.next(), try await handshake(first) {
                while let frame = try await frames.next() {
                    let request = try Self.request(in: frame)
                    if slot == .kept && !ConnectionSlots.servesOnKeptSlot(request) {
                        Self.wipe(request, received: frame)
                        logger.info("closing a kept connection that asked for ordinary work")
                        try? await send(.error(ConnectionSlots.keptSlotRefusal), id: 0)
                        break
                    }
                    try await serve(request, received: frame)
                }
            }
        } catch let violation as ProtocolViolation {
            try? await sendProtocolError(violation)
        } catch {
            logger.debug("connection ended", metadata: ["protd.error": "\(error)"])
        }
        await release()
        logger.debug("client disconnected")
    }

    // MARK: - Protocol

    private func handshake(_ frame: Frame) async throws -> Bool {
        let (answer, accepted) = try Self.answerHello(frame, peer: peer, maximumFrameLength: context.maximumFrameLength)
        try await send(answer, id: frame.requestID)
        return accepted
    }

    /// The answer to a connection's first frame, which must be a hello, and
    /// whether the connection goes on (the versions overlap).
    static func answerHello(_ frame: Frame, peer: PeerCredentials, maximumFrameLength: Int) throws
        -> (answer: Response, accepted: Bool) {
        // Whatever came first (an unlock in place of the hello too) is zeroed.
        defer { frame.wipeContent() }
        let request = try Request(frame: frame)
        defer { request.wipePasscodes() }
        guard case .hello(let minimum, let maximum, _) = request else {
            throw ProtocolViolation("the first request must be hello")
        }
        guard frame.requestID != 0 else { throw ProtocolViolation("request id 0 is reserved for events") }
        guard minimum <= WireProtocol.version && WireProtocol.version <= maximum else {
            return (.error(WireError(.unsupportedVersion, "this daemon speaks protocol version \(WireProtocol.version) only")),
                    false)
        }
        return (.helloAccepted(version: WireProtocol.version, maximumFrameLength: UInt32(maximumFrameLength),
                               uid: peer.uid, gid: peer.gid), true)
    }

    private func sendProtocolError(_ error: any Error) async throws {
        logger.info("protocol error; closing connection", metadata: ["protd.error": "\(error)"])
        try await send(.error(WireError(serving: error)), id: 0)
    }

    private func send(_ response: Response, id: UInt32) async throws {
        try await outbound.write(response.frame(requestID: id))
    }

    /// Sends frames that carry file content. The writer zeroes them once
    /// written; frames that cannot be handed to it are zeroed here.
    private func sendContent(_ frames: [Frame]) async throws {
        do {
            try await outbound.write(contentsOf: frames)
        } catch {
            for frame in frames { frame.wipeContent() }
            throw error
        }
    }

    /// The request `frame` carries; a frame that is none is zeroed.
    private static func request(in frame: Frame) throws -> Request {
        do {
            guard frame.requestID != 0 else { throw ProtocolViolation("request id 0 is reserved for events") }
            return try Request(frame: frame)
        } catch {
            frame.wipeContent()
            throw error
        }
    }

    /// Zeroes the content and passcodes of a request received in `frame`,
    /// once it is done with (docs/SECURITY.md).
    private static func wipe(_ request: Request, received frame: Frame) {
        frame.wipeContent()
        request.wipePasscodes()
    }

    /// Answers the request received in `frame`; failures become error
    /// answers, except protocol violations, which end the connection.
    /// Its content and passcodes are zeroed before any answer goes out.
    private func serve(_ request: Request, received frame: Frame) async throws {
        let id = frame.requestID
        defer { uncountClosedFiles() }
        do {
            let answer: Response?
            do {
                defer { Self.wipe(request, received: frame) }
                answer = try await self.answer(request, id: id)
            }
            if let answer { try await send(answer, id: id) }
        } catch let violation as ProtocolViolation {
            throw violation
        } catch {
            if error is ChannelError {
                // The client left while it was being answered (a stream cut short).
                logger.debug("client went away during a request", metadata: ["protd.request": "\(request.type)"])
            } else if let refusal = error as? WireError, refusal.code == .permissionDenied {
                logRefusal(of: request)
            } else if !(error is ProtectionError || error is WireError) {
                logger.error("request failed unexpectedly", metadata: ["protd.request": "\(request.type)",
                                                                        "protd.error": "\(error)"])
            }
            if case .writeChunk = request { discardWrite(id) }
            if case .writeEnd = request { discardWrite(id) }
            try? await send(.error(WireError(serving: error)), id: id)
        }
    }

    /// An audit line for a request refused for lack of permission, as for
    /// the administration that succeeds or fails (the logger carries the
    /// peer); at most `refusalsLoggedPerConnection` per connection.
    private func logRefusal(of request: Request) {
        refusalsLogged += 1
        if refusalsLogged <= Self.refusalsLoggedPerConnection {
            logger.notice("request refused: not permitted", metadata: ["protd.request": "\(request.type)"])
        }
        if refusalsLogged == Self.refusalsLoggedPerConnection {
            logger.notice("further refusals on this connection are not logged")
        }
    }

    /// The single answer to `request`, or nil when it answers itself
    /// (streams, deferred answers) or needs no answer yet.
    private func answer(_ request: Request, id: UInt32) async throws -> Response? {
        let store = context.store
        switch request {
        case .hello:
            throw ProtocolViolation("hello was already sent")
        case .status:
            return .status(await statusReport())
        case .lock(let grace, let wait, let reason):
            guard context.authorization.mayLock(peer) else {
                throw WireError.permissionDenied("locking needs root or the admin group")
            }
            if let grace, grace > Self.maximumGraceMilliseconds {
                throw WireError(.invalidArgument, "a grace period can be at most one day")
            }
            guard reason.isRequestable else {
                throw WireError(.invalidArgument, "a lock's reason may be requested or suspend; \(reason) is protd's own")
            }
            try await context.lockController.lock(grace: grace.map { .milliseconds(Int64($0)) }, reason: reason, by: peer)
            guard wait else { return .ok }
            // A pending answer is written by the sink, from the controller, the moment the lock settles.
            let events = events
            let settled = await context.lockController.answerWhenSettled(for: ObjectIdentifier(self)) { state in
                events.answer(Self.lockAnswer(settledIn: state).frame(requestID: id))
            }
            leftLockAnswers = leftLockAnswers || settled == nil
            return settled.map(Self.lockAnswer(settledIn:))
        case .unlock(let passcode):
            // `serve` zeroes the frame and `passcode` after this; the key
            // bag only ever sees guarded memory.
            let secret = try Self.secret(passcode, field: "passcode")
            try await context.lockController.unlock(passcode: secret, by: peer)
            return .ok
        case .loginUnlock(let uid, let passcode):
            // A PAM stack running as root speaks for any login, counted per
            // user; anyone else only for their own, counted as any unlock
            // (else every socket user would have a count of their own, free
            // of erase-after-N).
            guard peer.uid == 0 || peer.uid == uid else {
                throw WireError.permissionDenied("only root may unlock at another user's login")
            }
            let secret = try Self.secret(passcode, field: "passcode")
            let counter: AttemptCounter = peer.uid == 0 ? .login(uid: uid) : .machine
            try await context.lockController.unlock(passcode: secret, countedAgainst: counter, by: peer)
            return .ok
        case .passwd(let old, let new):
            guard context.authorization.mayChangePasscode(peer) else {
                throw WireError.permissionDenied("changing the passcode needs root or the admin group")
            }
            let newSecret = try Self.secret(new, field: "new passcode")
            let oldSecret = try old.map { try Self.secret($0, field: "old passcode") }
            try await context.lockController.changePasscode(newSecret, old: oldSecret, by: peer)
            return .ok
        case .erase:
            guard context.authorization.mayErase(peer) else { throw WireError.permissionDenied("erase needs root") }
            try await context.lockController.erase(by: peer)
            return .ok
        case .recoveryCreate(let passcode):
            guard context.authorization.mayManageRecoveryKey(peer) else {
                throw WireError.permissionDenied("making a recovery key needs root or the admin group")
            }
            let key = try await context.lockController.createRecoveryKey(
                passcode: try Self.secret(passcode, field: "passcode"), by: peer)
            // From guarded memory into the frame, which the writer zeroes once sent: its only copy.
            defer { key.wipe() }
            try await sendContent([try key.withUnsafeBytes { Response.recoveryKeyFrame(requestID: id, key: $0) }])
            return nil
        case .recoveryRemove:
            guard context.authorization.mayManageRecoveryKey(peer) else {
                throw WireError.permissionDenied("removing the recovery key needs root or the admin group")
            }
            try await context.lockController.removeRecoveryKey(by: peer)
            return .ok
        case .recoveryReset(let recoveryKey, let newPasscode):
            let key = try Self.secret(recoveryKey, field: "recovery key")
            defer { key.wipe() }
            try await context.lockController.resetPasscode(
                recoveryKey: key, new: try Self.secret(newPasscode, field: "new passcode"), by: peer)
            return .ok
        case .check:
            guard context.authorization.mayCheckStore(peer) else {
                throw WireError.permissionDenied("checking the store needs root or the admin group")
            }
            // A walk of every file: off the cooperative threads.
            let report = try await BlockingIO.run { try store.check() }
            logger.notice("store checked", metadata: ["protd.check.files": "\(report.files)",
                                                      "protd.check.problems": "\(report.problemCount)"])
            return .checkReport(report.fitted())
        case .writeBegin(let name, let protection, let durable):
            try claimWriteID(id)
            do {
                try ensureRoomForAnotherFile()
                writes[id] = try store.beginWrite(to: try FileName(name), in: namespace, protection: protection,
                                                  durable: durable)
            } catch {
                discardWrite(id)
                throw error
            }
            return nil
        case .writeChunk(let data):
            if answeredWrites.contains(id) { return nil }
            guard let pending = writes[id] else { throw WireError(.invalidArgument, "no write in progress for request \(id)") }
            try data.withUnsafeReadableBytes { try pending.append($0) }
            return nil
        case .writeEnd:
            if answeredWrites.remove(id) != nil { return nil }
            guard let pending = writes.removeValue(forKey: id) else {
                throw WireError(.invalidArgument, "no write in progress for request \(id)")
            }
            // The commit fsyncs (AtomicFileTransaction): off the cooperative pool.
            let size = try await BlockingIO.run { try pending.commit() }
            return .size(UInt64(size))
        case .writeAbort:
            if answeredWrites.remove(id) != nil { return nil }
            guard let pending = writes.removeValue(forKey: id) else {
                throw WireError(.invalidArgument, "no write in progress for request \(id)")
            }
            pending.abort()
            return .ok
        case .read(let name, let offset, let length):
            try await streamRead(name: name, offset: offset, length: length, id: id)
            return nil
        case .open(let name, let mode, let protection):
            try ensureRoomForAnotherFile()
            let openMode: OpenMode = switch mode {
            case .existing: .existing
            case .createNew: .createNew(protection)
            case .openOrCreate: .openOrCreate(protection)
            }
            let handle = try store.open(try FileName(name), in: namespace, mode: openMode)
            let size: Int
            do {
                size = try handle.size()
            } catch {
                handle.close()
                throw error
            }
            while handles[nextHandle] != nil || nextHandle == 0 { nextHandle &+= 1 }
            let number = nextHandle
            nextHandle &+= 1
            handles[number] = handle
            return .handleOpened(handle: number, protection: handle.protection ?? protection, size: UInt64(size))
        case .handleRead(let number, let offset, let length):
            let handle = try handle(number)
            let start = try Self.offset(offset)
            let wanted = min(Int(length), chunkSize)
            try await sendContent([try Self.dataFrame(reading: handle, at: start, count: wanted, chunk: false, id: id).frame])
            return nil
        case .handleWrite(let number, let offset, let data):
            let handle = try handle(number)
            let start = try Self.offset(offset)
            let write: @Sendable () throws -> Int = {
                try data.withUnsafeReadableBytes { try handle.write($0, at: start) }
                return try handle.size()
            }
            // Far past the end, the gap's zeros are sealed first: off the
            // cooperative threads, as a growing truncate.
            guard handle.leavesLongGap(upTo: start) else { return .size(UInt64(try write())) }
            return .size(UInt64(try await BlockingIO.run(write)))
        case .handleAppend(let number, let data):
            let handle = try handle(number)
            return .size(UInt64(try data.withUnsafeReadableBytes { try handle.append($0) }))
        case .handleTruncate(let number, let size):
            let handle = try handle(number)
            let newSize = try Self.offset(size)
            // Growing a file by gigabytes seals every new segment: off the
            // cooperative threads, so other connections' requests go on.
            return .size(UInt64(try await BlockingIO.run {
                try handle.truncate(to: newSize)
                return try handle.size()
            }))
        case .handleSize(let number):
            return .size(UInt64(try handle(number).size()))
        case .handleSync(let number):
            let handle = try handle(number)
            try await BlockingIO.run { try handle.sync() }
            return .ok
        case .handleClose(let number):
            try handle(number).close()
            handles.removeValue(forKey: number)
            return .ok
        case .getProtection(let name):
            return .protection(try store.protection(of: try FileName(name), in: namespace))
        case .setProtection(let name, let protection):
            try store.setProtection(protection, of: try FileName(name), in: namespace)
            return .ok
        case .list(let prefix):
            // A large namespace takes a while to list: off the cooperative threads.
            let entries = try await BlockingIO.run { [namespace] in try store.list(in: namespace, prefix: prefix) }
            let size = WireProtocol.listChunkEntries
            for chunk in stride(from: 0, to: entries.count, by: size) {
                try await send(.listChunk(entries[chunk..<min(entries.count, chunk + size)].map(WireAttributes.init)), id: id)
            }
            return .end
        case .stat(let name):
            return .attributes(WireAttributes(try store.attributes(of: try FileName(name), in: namespace)))
        case .delete(let name):
            try store.delete(try FileName(name), in: namespace)
            return .ok
        case .subscribe:
            if subscription == nil {
                try context.holdings.take(.subscription, for: peer.uid)
                let subscriber = context.hub.subscribe(events)
                subscription = subscriber
                try await send(.subscribed(await statusReport()), id: id)
                // Events that came meanwhile wait in the sink, to go out after the answer.
                events.start { [controller = context.lockController] sequence in
                    controller.takeAcknowledgement(subscriber, sequence: sequence)
                }
                return nil
            }
            return .subscribed(await statusReport())
        case .acknowledge(let sequence):
            guard let subscription else {
                throw WireError(.invalidArgument, "acknowledge needs a subscription on this connection")
            }
            await context.lockController.acknowledge(subscription, sequence: sequence)
            return nil
        }
    }

    // MARK: - Helpers

    /// Streams `length` bytes from `offset` as data chunks, then `end`.
    private func streamRead(name: String, offset: UInt64, length: UInt64, id: UInt32) async throws {
        let store = context.store
        let fileName = try FileName(name)
        var position = try Self.offset(offset)
        var remaining = length
        // A file that fits in one chunk is answered in one go: one key
        // window for all its key work (`ProtectedStore.readSmallFile`).
        let small = try store.readSmallFile(
            fileName, in: namespace, offset: position, count: Int(clamping: remaining), ifAtMost: chunkSize
        ) { count, fill in
            try Response.dataFrame(chunk: true, requestID: id, capacity: count) { buffer in
                try fill(buffer)
                return count
            }
        }
        if let (frame, count) = small {
            try await sendContent((count > 0 ? [frame] : []) + [Response.end.frame(requestID: id)])
            return
        }
        // Opens the file and reads its first chunk; when that is all of it,
        // the file is closed (wiping its key) before the answer goes out.
        // Every chunk comes from the inode open at the start, and from its
        // first chunk's version: a handle writing it in place meanwhile
        // ends the read with `fileChanged` rather than a mix.
        var version: UInt64?
        let (handle, first) = try {
            let handle = try store.open(fileName, in: namespace, mode: .existing)
            do {
                let first = try nextChunk(of: handle, at: position, remaining: remaining, id: id, version: &version)
                if first?.last ?? true { handle.close() }
                return (handle, first)
            } catch {
                handle.close()
                throw error
            }
        }()
        defer { handle.close() }
        var chunk = first
        while let (frame, count, last) = chunk {
            if last {
                // The end goes out with the last chunk, in one write: a small
                // file's whole answer is one hand-off to the event loop.
                try await sendContent([frame, Response.end.frame(requestID: id)])
                return
            }
            try await sendContent([frame])
            position += count
            remaining -= UInt64(count)
            chunk = try nextChunk(of: handle, at: position, remaining: remaining, id: id, version: &version)
        }
        try await send(.end, id: id)
    }

    /// The next chunk of a streamed read, at most `remaining` bytes from
    /// `position`; nil when there is nothing more. `last` when it ends the
    /// read: it reached `remaining`, or came short (the end of the file).
    private func nextChunk(of handle: ProtectedFileHandle, at position: Int, remaining: UInt64,
                           id: UInt32, version: inout UInt64?) throws -> (frame: Frame, count: Int, last: Bool)? {
        guard remaining > 0 else { return nil }
        let wanted = Int(min(remaining, UInt64(chunkSize)))
        let (frame, count, seen) = try Self.dataFrame(reading: handle, at: position, count: wanted, chunk: true, id: id,
                                                      sameVersionAs: version)
        version = seen
        guard count > 0 else { return nil }
        return (frame, count, count < wanted || UInt64(count) == remaining)
    }

    /// A data frame holding up to `count` bytes of `handle` from `offset`,
    /// decrypted straight into the frame; also how many bytes it holds.
    /// With `expected` (the version an earlier chunk of the same read saw),
    /// a file written since fails with `fileChanged`; the version this
    /// chunk saw comes back for the next.
    /// The frame is sized to what the file holds from `offset`, so a small
    /// file's answer does not take a whole chunk of memory (which the
    /// allocator took from the system and gave back on every read).
    private static func dataFrame(
        reading handle: ProtectedFileHandle, at offset: Int, count: Int, chunk: Bool, id: UInt32,
        sameVersionAs expected: UInt64? = nil
    ) throws -> (frame: Frame, count: Int, version: UInt64) {
        let available = min(count, max(0, try handle.size() - offset))
        var version: UInt64 = 0
        let (frame, read) = try Response.dataFrame(chunk: chunk, requestID: id, capacity: available) { buffer in
            let (count, seen) = try handle.read(offset: offset, count: available, into: buffer, sameVersionAs: expected)
            version = seen
            return count
        }
        return (frame, read, version)
    }

    private func handle(_ number: UInt32) throws -> ProtectedFileHandle {
        guard let handle = handles[number] else {
            throw WireError(.handleClosed, "no open handle \(number) on this connection")
        }
        return handle
    }

    /// Takes `id` for a new write: one with a write in progress is a
    /// protocol violation; one whose earlier write failed may be used again.
    private func claimWriteID(_ id: UInt32) throws {
        guard writes[id] == nil else { throw ProtocolViolation("request id \(id) already has a write in progress") }
        answeredWrites.remove(id)
    }

    /// Open handles and writes in progress each hold a file descriptor;
    /// together they may not pass the connection's limit, nor the uid's
    /// over all its connections. Counts one more for the uid.
    private func ensureRoomForAnotherFile() throws {
        guard handles.count + writes.count < context.limits.filesPerConnection else {
            throw WireError(.tooManyHandles, "this connection already has \(handles.count) open handles and "
                            + "\(writes.count) writes in progress, the most limits.max-open-handles-per-connection "
                            + "allows; close or finish some first")
        }
        try context.holdings.take(.file, for: peer.uid)
        countedFiles += 1
    }

    /// Gives the uid back what `ensureRoomForAnotherFile` counted for
    /// handles and writes this connection no longer holds.
    private func uncountClosedFiles() {
        let held = handles.count + writes.count
        guard countedFiles > held else { return }
        context.holdings.give(.file, count: countedFiles - held, for: peer.uid)
        countedFiles = held
    }

    /// After a failed chunk or commit: the error is the write's answer;
    /// its remaining frames are ignored. The set is bounded, since a client
    /// need not send anything more for a failed write.
    private func discardWrite(_ id: UInt32) {
        writes.removeValue(forKey: id)?.abort()
        if answeredWrites.count >= Self.maximumRememberedWrites { answeredWrites.removeAll() }
        answeredWrites.insert(id)
    }

    /// A waiting lock's answer: `ok` once protected data is unavailable
    /// (`locked`, or still `beforeFirstUnlock`), else the lock was cancelled.
    private static func lockAnswer(settledIn state: LockState) -> Response {
        state == .locked || state == .beforeFirstUnlock
            ? .ok
            : .error(WireError(.protectedDataUnavailable, "the lock did not complete; the state is now \(state)"))
    }

    private static let maximumRememberedWrites = 1024
    private static let maximumGraceMilliseconds: UInt32 = 86_400_000

    private func statusReport() async -> StatusReport {
        let status = context.store.status
        return StatusReport(
            state: status.state, passcodeSet: status.passcodeSet, failedAttempts: UInt32(clamping: status.failedAttempts),
            retryAfterSeconds: UInt64(max(0, status.secondsUntilNextAttempt)),
            gracePeriodMilliseconds: UInt64(max(0, context.lockController.gracePeriod.milliseconds)),
            eventSequence: status.eventSequence,
            lockDeadlineUnixMilliseconds: status.lockDeadline.map(UnixTime.milliseconds(at:)) ?? 0,
            keyMemoryLocked: MemoryLocking.isKeyMemoryLocked,
            firstUnlockTimeoutMilliseconds: UInt64(max(0, status.firstUnlockTimeout?.milliseconds ?? 0)),
            // At least 1 while it runs: 0 says it does not.
            firstUnlockRemainingMilliseconds: status.firstUnlockDeadline.map {
                UInt64(max(1, BootInstant.now.duration(to: $0).milliseconds))
            } ?? 0,
            recoveryKeySet: status.recoveryKeySet, fault: status.fault)
    }

    private static func secret(_ bytes: [UInt8], field: String) throws -> SecretBytes {
        guard !bytes.isEmpty else { throw WireError(.invalidArgument, "the \(field) must not be empty") }
        return try bytes.withUnsafeBytes { try SecretBytes(copying: $0) }
    }

    private static func offset(_ value: UInt64) throws -> Int {
        guard value <= UInt64(Int.max) else { throw WireError(.invalidArgument, "offset \(value) is too large") }
        return Int(value)
    }

    /// Closes handles, aborts writes, drops pending lock answers, leaves
    /// the event hub.
    private func release() async {
        if leftLockAnswers { await context.lockController.forgetAnswers(for: ObjectIdentifier(self)) }
        for handle in handles.values { handle.close() }
        handles.removeAll()
        for pending in writes.values { pending.abort() }
        writes.removeAll()
        uncountClosedFiles()
        if let subscription {
            context.holdings.give(.subscription, for: peer.uid)
            context.hub.unsubscribe(subscription)
            await context.lockController.subscriberLeft(subscription)
        }
    }
}

extension WireAttributes {
    init(_ attributes: FileAttributes) {
        self.init(name: attributes.name.value, protection: attributes.protection, size: UInt64(attributes.size),
                  modificationTime: attributes.modificationTime)
    }
}
