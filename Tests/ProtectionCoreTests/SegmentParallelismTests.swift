@testable import ProtectionCore
import Foundation
import Synchronization
import Testing

/// Segments are spread over the cores only for the cipher slow enough for
/// that to pay; otherwise they run inline on the calling thread.
@Suite("Segment parallelism")
struct SegmentParallelismTests {
    @Test("only XChaCha20-Poly1305 spreads a chunk's segments across cores")
    func onlyTheSoftwareCipherSpreads() {
        #expect(ContentCipher.allCases.filter(\.spreadsSegmentsAcrossCores) == [.xChaCha20Poly1305])
        for cipher in ContentCipher.allCases {
            #expect(SegmentLayout(segmentSize: 65_536, cipher: cipher).spreadsAcrossCores
                == cipher.spreadsSegmentsAcrossCores)
        }
    }

    @Test("inline, every segment runs on the calling thread, in order, and the first error ends the run")
    func inlineRunsOnTheCaller() throws {
        let caller = Thread.current
        var order: [Int] = []
        try SegmentParallelism.forEach(16, spread: false) { index in
            #expect(Thread.current == caller)
            order.append(index)
        }
        #expect(order == Array(0..<16))
        struct Stop: Error {}
        var ran = 0
        #expect(throws: Stop.self) {
            try SegmentParallelism.forEach(16, spread: false) { index in
                ran += 1
                if index == 3 { throw Stop() }
            }
        }
        #expect(ran == 4)
    }

    @Test("spread, every segment runs once and an error from any is rethrown after all ran",
          .enabled(if: SegmentParallelism.cores > 1, "one core: nothing to spread over"))
    func spreadRunsEverySegment() throws {
        let counts = Mutex([Int](repeating: 0, count: 64))
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try SegmentParallelism.forEach(64, spread: true) { index in
                counts.withLock { $0[index] += 1 }
                if index == 5 { throw Stop() }
            }
        }
        #expect(counts.withLock { $0 } == [Int](repeating: 1, count: 64))
    }
}
