import ProtectionWire
import Testing

@Suite("Content chunk size under a frame limit")
struct ChunkSizeTests {
    @Test("512 KiB under the default limit, 256 KiB under the smallest, whole 64 KiB steps between")
    func chunkSizeFollowsTheLimit() {
        #expect(WireProtocol.chunkSize(forFrameLimit: 1_049_600) == 512 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: 1 << 30) == 512 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: WireProtocol.minimumFrameLength) == 256 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: 400_000) == 6 * 64 * 1024)
        // 524,288 + 64 is the first limit that fits a whole 512 KiB chunk.
        #expect(WireProtocol.chunkSize(forFrameLimit: 524_288 + 63) == 7 * 64 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: 524_288 + 64) == 512 * 1024)
    }

    @Test("every limit a daemon may announce fits at least the smallest chunk and its fields")
    func everyAllowedLimitFitsAChunk() {
        for limit in stride(from: WireProtocol.minimumFrameLength, through: 2 << 20, by: 4093) {
            let chunk = WireProtocol.chunkSize(forFrameLimit: limit)
            #expect(chunk >= WireProtocol.minimumChunkSize && chunk % WireProtocol.chunkAlignment == 0)
            #expect(chunk + WireProtocol.chunkFrameOverhead <= limit)
        }
    }
}
