import ProtectionWire
import Testing

@Suite("Content chunk size under a frame limit")
struct ChunkSizeTests {
    @Test("512 KiB under the default limit; at least 256 KiB, in whole 64 KiB, under every limit a daemon may announce")
    func chunkSizeFollowsTheLimit() {
        #expect(WireProtocol.chunkSize(forFrameLimit: 1_049_600) == 512 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: 1 << 30) == 512 * 1024)
        // 524,288 + 64 is the smallest limit that fits a whole 512 KiB chunk.
        #expect(WireProtocol.chunkSize(forFrameLimit: 524_288 + 64) == 512 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: 524_288 + 63) == 448 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: WireProtocol.minimumFrameLength) == 256 * 1024)
        // Below the smallest limit a daemon may announce, not even 256 KiB fits.
        #expect(WireProtocol.chunkSize(forFrameLimit: 262_144 + 64) == 256 * 1024)
        #expect(WireProtocol.chunkSize(forFrameLimit: 262_144 + 63) == 262_144 + 63 - 64)
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
