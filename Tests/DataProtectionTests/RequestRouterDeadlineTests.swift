@testable import DataProtection
import NIOCore
import NIOPosix
import ProtectionWire
import Foundation
import Testing

/// When an answer's timeout runs: a streamed answer is bounded frame by
/// frame, and a streamed write's answer only from its end. Real time, with
/// a 1 s timeout and the router's 250 ms sweep.
@Suite("Request deadlines")
struct RequestRouterDeadlineTests {
    static func frame(_ response: Response, id: UInt32) -> Frame { response.frame(requestID: id) }

    @Test("a streamed answer outlasts the timeout while its frames keep coming")
    func streamedAnswerIsBoundedPerFrame() async throws {
        let router = RequestRouter(loop: MultiThreadedEventLoopGroup.singleton.next(), timeout: .seconds(2))
        let id = try router.register(.untilEnd)
        // A thread of its own: the suite's load on the cooperative pool
        // must not stretch the gaps between frames.
        let feeder = Thread {
            for _ in 0..<10 {
                Thread.sleep(forTimeInterval: 0.3)
                _ = router.receive(Self.frame(.data(ByteBuffer(bytes: [1, 2])), id: id))
            }
            _ = router.receive(Self.frame(.end, id: id))
        }
        feeder.start()
        let frames = try await router.wait(for: id).get()
        #expect(frames.count == 11, "3 s of frames 300 ms apart ended with \(frames.count) frames")
    }

    @Test("an answer registered as not due waits past the timeout, then times out once its clock starts")
    func clockStartsWhenTold() async throws {
        let router = RequestRouter(loop: MultiThreadedEventLoopGroup.singleton.next(), timeout: .seconds(1))
        let id = try router.register(.single, due: false)
        try await Task.sleep(for: .milliseconds(1600))
        #expect(router.peek(id) == nil)
        let started = ContinuousClock.now
        router.startClock(id)
        let outcome = await router.wait(for: id)
        #expect(throws: DataProtectionError.self) { try outcome.get() }
        if case .failure(let error) = outcome { #expect(error.code == .timedOut) }
        #expect(ContinuousClock.now - started >= .seconds(1))
    }
}
