// libFuzzer target: the wire's frame decoder and request and response parsing.
//
// An input is `cut | threshold | stream`: `stream` arrives in reads of `cut`
// bytes (all at once when 0) and is split into frames by four decoders, as
// NIO drives them (`NIOSingleStepByteToMessageProcessor`):
//
// - the daemon's: the default frame limit, every body copied out as it
//   arrives and every byte taken zeroed (`FrameDecoder.wiping`);
// - the client's: a 16 MiB limit, nothing copied;
// - two with an 8 KiB limit (above any input's length, so frames complete):
//   one copying bodies of `1 + threshold % 64` bytes or more out as they
//   arrive, so that small inputs take the copying path to its end, the
//   other copying nothing. They must give the same frames, and fail at the
//   same point. (Not the daemon's limit: each body the first copies gets a
//   buffer of its declared length at once, and megabytes of those per input
//   would slow the fuzzer tenfold.)
//
// Every frame is parsed as a request (what the daemon does with it) and as
// a response or event (what the client does). A parse gives a value or a
// `ProtocolViolation`, nothing else; a parsed message encoded again parses
// to the same value. Anything else traps, and libFuzzer reports it.
//
// `PROTD_FUZZ_WRITE_SEEDS=DIR FuzzFrames` writes the seed corpus (one
// stream of frames per message kind) into DIR and exits.

internal import Glibc
internal import NIOCore
internal import ProtectionModel
internal import ProtectionWire

/// The daemon's default `limits.max-frame-bytes` (`DaemonConfiguration`).
private let daemonFrameLimit = 1_048_576 + 1024
/// `DataProtection.Connection.clientFrameLimit`.
private let clientFrameLimit = 16 * 1024 * 1024
/// The limit of the two decoders compared: above any input's length.
private let comparisonFrameLimit = 8192

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrames(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard count >= 2, let start else { return 0 }
    let input = UnsafeRawBufferPointer(start: start, count: count)
    let cut = Int(input[0])
    let threshold = 1 + Int(input[1]) % 64
    let stream = UnsafeRawBufferPointer(rebasing: input[2...])

    let daemon = split(stream, cut: cut, FrameDecoder.wiping(maximumFrameLength: daemonFrameLimit))
    let client = split(stream, cut: cut, FrameDecoder(maximumFrameLength: clientFrameLimit))
    let copying = split(stream, cut: cut, FrameDecoder(maximumFrameLength: comparisonFrameLimit, copyThreshold: threshold))
    let slicing = split(stream, cut: cut, FrameDecoder(maximumFrameLength: comparisonFrameLimit))
    precondition(copying.frames == slicing.frames && copying.failed == slicing.failed,
                 "copying bodies out (threshold \(threshold)) changed the frames")
    for frame in daemon.frames { checkRequest(frame) }
    for frame in client.frames { checkResponse(frame) }
    return 0
}

/// The frames `decoder` splits `stream` into when it arrives in reads of
/// `cut` bytes and then ends, and whether it ended in a protocol violation.
private func split(_ stream: UnsafeRawBufferPointer, cut: Int, _ decoder: FrameDecoder)
    -> (frames: [Frame], failed: Bool) {
    let processor = NIOSingleStepByteToMessageProcessor(decoder)
    var frames: [Frame] = []
    let step = cut == 0 ? max(stream.count, 1) : cut
    do {
        for offset in stride(from: 0, to: stream.count, by: step) {
            let read = UnsafeRawBufferPointer(rebasing: stream[offset..<min(offset + step, stream.count)])
            var buffer = ByteBufferAllocator().buffer(capacity: read.count)
            buffer.writeBytes(read)
            try processor.process(buffer: buffer) { frames.append($0) }
        }
        try processor.finishProcessing(seenEOF: true) { frames.append($0) }
        return (frames, false)
    } catch is ProtocolViolation {
        return (frames, true)
    } catch {
        preconditionFailure("the frame decoder threw \(type(of: error)), not a ProtocolViolation: \(error)")
    }
}

/// Parses `frame` as the daemon does; a request parsed again from its own
/// frame is the same request.
private func checkRequest(_ frame: Frame) {
    let request: Request
    do {
        request = try Request(frame: frame)
    } catch is ProtocolViolation {
        return
    } catch {
        preconditionFailure("Request(frame:) threw \(type(of: error)), not a ProtocolViolation: \(error)")
    }
    let again = request.frame(requestID: frame.requestID)
    precondition(again.type == frame.type, "\(request) encodes with another type byte")
    precondition((try? Request(frame: again)) == request, "\(request) does not survive encoding and parsing")
    precondition((try? Request(frame: decodedAgain(again))) == request, "\(request) does not survive the wire")
}

/// Parses `frame` as the client does; a response parsed again from its own
/// frame is the same response.
private func checkResponse(_ frame: Frame) {
    let response: Response
    do {
        response = try Response(frame: frame)
    } catch is ProtocolViolation {
        return
    } catch {
        preconditionFailure("Response(frame:) threw \(type(of: error)), not a ProtocolViolation: \(error)")
    }
    let again = response.frame(requestID: frame.requestID)
    precondition(again.type == frame.type, "\(response) encodes with another type byte")
    precondition((try? Response(frame: again)) == response, "\(response) does not survive encoding and parsing")
}

/// `frame` as the peer's decoder gets it: encoded, then split again.
private func decodedAgain(_ frame: Frame) -> Frame {
    var decoder = FrameDecoder(maximumFrameLength: clientFrameLimit)
    var wire = frame.encoded()
    guard let decoded = try? decoder.decode(buffer: &wire), wire.readableBytes == 0 else {
        preconditionFailure("an encoded frame does not decode as one frame")
    }
    return decoded
}

// MARK: - Seeds

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>?,
                       _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    if let directory = getenv("PROTD_FUZZ_WRITE_SEEDS") {
        writeSeeds(to: String(cString: directory))
        exit(0)
    }
    return 0
}

/// One seed per request and response kind: a hello then the message, as a
/// connection sends them, in one read (cut 0); a few with other cuts.
private func writeSeeds(to directory: String) {
    let hello = Request.hello(minimumVersion: WireProtocol.version, maximumVersion: WireProtocol.version, client: "fuzz")
    var data = ByteBufferAllocator().buffer(capacity: 16)
    data.writeString("sixteen bytes...")
    let requests: [Request] = [
        .status, .lock(graceMilliseconds: 1500, waitUntilLocked: true, reason: .suspend),
        .lock(graceMilliseconds: nil, waitUntilLocked: false, reason: .requested),
        .unlock(passcode: Array("secret".utf8)), .passwd(old: Array("old".utf8), new: Array("new".utf8)),
        .passwd(old: nil, new: Array("new".utf8)), .erase,
        .writeBegin(name: "notes/a.txt", protection: .complete, durable: true), .writeChunk(data), .writeEnd,
        .writeAbort, .read(name: "a", offset: 3, length: WireProtocol.toEnd),
        .open(name: "b", mode: .openOrCreate, protection: .completeUnlessOpen),
        .handleRead(handle: 1, offset: 0, length: 4096), .handleWrite(handle: 1, offset: 8, data: data),
        .handleAppend(handle: 1, data: data), .handleTruncate(handle: 1, size: 10), .handleSize(handle: 1),
        .handleSync(handle: 1), .handleClose(handle: 1), .getProtection(name: "a"),
        .setProtection(name: "a", protection: .none), .list(prefix: "notes/"), .stat(name: "a"), .delete(name: "a"),
        .subscribe, .acknowledge(sequence: 7), .loginUnlock(uid: 1001, passcode: Array("secret".utf8)),
        .recoveryCreate(passcode: Array("secret".utf8)), .recoveryRemove,
        .recoveryReset(recoveryKey: Array(0..<32), newPasscode: Array("new".utf8)), .check,
    ]
    let report = StatusReport(state: .locking, passcodeSet: true, failedAttempts: 2, retryAfterSeconds: 5,
                              gracePeriodMilliseconds: 10_000, eventSequence: 3, lockDeadlineUnixMilliseconds: 1_700_000_000_000,
                              keyMemoryLocked: true, firstUnlockTimeoutMilliseconds: 259_200_000,
                              firstUnlockRemainingMilliseconds: 1_000, recoveryKeySet: true, fault: nil)
    let attributes = WireAttributes(name: "notes/a.txt", protection: .completeUntilFirstUserAuthentication,
                                    size: 12, modificationTime: 1_700_000_000)
    let responses: [Response] = [
        .ok, .helloAccepted(version: WireProtocol.version, maximumFrameLength: UInt32(daemonFrameLimit), uid: 1000, gid: 1000),
        .status(report), .subscribed(StatusReport(state: .unlocked, passcodeSet: false, failedAttempts: 0,
                                                  retryAfterSeconds: 0, gracePeriodMilliseconds: 0, eventSequence: 0,
                                                  lockDeadlineUnixMilliseconds: 0, keyMemoryLocked: false,
                                                  fault: "key bag unreadable")),
        .size(42), .handleOpened(handle: 3, protection: .complete, size: 12), .protection(.none),
        .attributes(attributes), .data(data), .dataChunk(data), .end, .listChunk([attributes, attributes]),
        .error(WireError(.rateLimited, "wait", retryAfterSeconds: 30)),
        .event(WireEvent(kind: .willBecomeUnavailable, sequence: 4, state: .locking,
                         deadlineUnixMilliseconds: 1_700_000_000_000, reason: .suspend)),
        .event(WireEvent(kind: .didBecomeUnavailable, sequence: 5, state: .beforeFirstUnlock, reason: .inactivity)),
        .event(WireEvent(kind: .didBecomeAvailable, sequence: 6, state: .unlocked, firstUnlock: true)),
        .recoveryKey(Array(repeating: 0x5A, count: 32)),
        .checkReport(StoreCheckReport(namespaces: 2, files: 9, verifiedFiles: 6, unverifiableFiles: 2, problemCount: 3,
                                     problems: [.init(uid: 1000, name: "notes/a.txt", path: "store/ns/files/entry",
                                                      description: "its length is not whole segments"),
                                                .init(uid: nil, name: nil, path: "store/1000", description: "legacy")])),
    ]
    func write(_ name: String, cut: UInt8, _ frames: [Frame]) {
        var bytes: [UInt8] = [cut, 15]
        for frame in frames { bytes += Array(buffer: frame.encoded()) }
        let path = directory + "/" + name
        guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
    for (index, request) in requests.enumerated() {
        write("request-\(index)-\(request.type)", cut: 0, [hello.frame(requestID: 1), request.frame(requestID: 2)])
    }
    for (index, response) in responses.enumerated() {
        write("response-\(index)-\(response.type)", cut: 0, [response.frame(requestID: 2)])
    }
    // A streamed write cut into reads of 7 bytes, so frames span reads.
    write("stream-write-cut-7", cut: 7, [hello.frame(requestID: 1), Request.writeBegin(name: "a", protection: .none,
                                        durable: false).frame(requestID: 2), Request.writeChunk(data).frame(requestID: 2),
                                        Request.writeEnd.frame(requestID: 2)])
}
