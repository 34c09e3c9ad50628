import NIOCore
@testable import ProtectionDaemon
import Testing

/// The decoder's pool of chunk copies: blocks come back for reuse, only a
/// few are kept, and releasing unmaps them.
@Suite("Chunk body pool", .serialized)
struct ChunkBodyPoolTests {
    /// A size no other test allocates, so counts are this test's own.
    static let size = 3 * 4096 + 48

    @Test("a freed block is the next one handed out for its size, and releasing the kept ones empties the list")
    func reuse() throws {
        ChunkBodyPool.releaseFreeBlocks()
        let first = try #require(ChunkBodyPool.allocate(Self.size))
        first.storeBytes(of: 0xA5, as: UInt8.self)
        ChunkBodyPool.deallocate(first)
        #expect(ChunkBodyPool.freeBlockCount(size: Self.size) == 1)
        let again = try #require(ChunkBodyPool.allocate(Self.size))
        #expect(again == first)
        #expect(ChunkBodyPool.freeBlockCount(size: Self.size) == 0)
        let other = try #require(ChunkBodyPool.allocate(Self.size * 2))
        #expect(other != first)
        ChunkBodyPool.deallocate(again)
        ChunkBodyPool.deallocate(other)
        ChunkBodyPool.releaseFreeBlocks()
        #expect(ChunkBodyPool.freeBlockCount(size: Self.size) == 0)
        #expect(ChunkBodyPool.freeBlockCount(size: Self.size * 2) == 0)
    }

    @Test("at most blocksKeptPerSize freed blocks are kept; the rest are unmapped")
    func keepsFew() throws {
        ChunkBodyPool.releaseFreeBlocks()
        let blocks = try (0..<(ChunkBodyPool.blocksKeptPerSize + 3)).map { _ in
            try #require(ChunkBodyPool.allocate(Self.size))
        }
        #expect(Set(blocks).count == blocks.count)
        for block in blocks { ChunkBodyPool.deallocate(block) }
        #expect(ChunkBodyPool.freeBlockCount(size: Self.size) == ChunkBodyPool.blocksKeptPerSize)
        ChunkBodyPool.releaseFreeBlocks()
    }

    @Test("reallocating keeps the bytes, and a buffer from the allocator returns its block when dropped")
    func throughByteBuffer() throws {
        ChunkBodyPool.releaseFreeBlocks()
        let small = try #require(ChunkBodyPool.allocate(Self.size))
        let bytes = (0..<Self.size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        bytes.withUnsafeBytes { small.copyMemory(from: $0.baseAddress!, byteCount: Self.size) }
        let grown = try #require(ChunkBodyPool.reallocate(small, from: Self.size, to: Self.size * 4))
        #expect(Array(UnsafeRawBufferPointer(start: grown, count: Self.size)) == bytes)
        #expect(ChunkBodyPool.freeBlockCount(size: Self.size) == 1)
        ChunkBodyPool.deallocate(grown)

        // NIO rounds capacities up to powers of two; none of the other tests
        // in this process makes a buffer this large (its pages stay unmapped).
        let capacity = 1 << 26
        do {
            var buffer = ChunkBodyPool.allocator.buffer(capacity: capacity)
            buffer.writeBytes(bytes)
            #expect(buffer.readBytes(length: bytes.count) == bytes)
        }
        #expect(ChunkBodyPool.freeBlockCount(size: capacity) == 1)
        ChunkBodyPool.releaseFreeBlocks()
        #expect(ChunkBodyPool.freeBlockCount(size: capacity) == 0)
    }
}
