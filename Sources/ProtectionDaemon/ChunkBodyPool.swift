internal import Glibc
@_spi(CustomByteBufferAllocator) internal import NIOCore
internal import Synchronization

/// Memory for the data chunks the frame decoder copies out of the receive
/// buffer (`FrameDecoder.chunkCopyThreshold`). NIO rounds every buffer up to
/// a power of two, so a 512 KiB chunk with its 4-byte length takes a 1 MiB
/// block and fills half of it. From glibc's heap, freed blocks merged and
/// came back at shifted offsets until their untouched halves were touched
/// too, and every chunk's copy began with page faults on fresh memory. Here
/// each block is mapped once and, when freed, kept on a short list of its
/// size and handed out again (last freed, first out), so a stream reuses the
/// same few blocks and only their used parts are ever resident (docs/DESIGN.md,
/// Memory). `releaseFreeBlocks()` unmaps the kept blocks when a write ends
/// or a connection closes, so what they held does not stay mapped long after.
enum ChunkBodyPool {
    /// The allocator whose buffers come from the pool.
    static let allocator = ByteBufferAllocator(
        allocate: { ChunkBodyPool.allocate($0) },
        reallocate: { pointer, oldSize, newSize in ChunkBodyPool.reallocate(pointer, from: oldSize, to: newSize) },
        deallocate: { ChunkBodyPool.deallocate($0) },
        copy: { destination, source, count in destination.copyMemory(from: source, byteCount: count) })

    /// Freed blocks kept per size; more are unmapped at once.
    static let blocksKeptPerSize = 8
    /// Bytes in front of each block's memory that record its size (16 keep
    /// the memory as aligned as malloc's).
    private static let headerBytes = 16

    /// Freed blocks by size (their addresses, header included).
    private static let freeBlocks = Mutex<[Int: [UInt]]>([:])

    /// Unmaps every kept block. Blocks in use stay; they are kept when freed
    /// and unmapped by a later call.
    static func releaseFreeBlocks() {
        let released = freeBlocks.withLock { blocks in
            defer { blocks.removeAll(keepingCapacity: true) }
            return blocks.flatMap { size, addresses in addresses.map { (size, $0) } }
        }
        for (size, address) in released { unmap(UnsafeMutableRawPointer(bitPattern: address)!, size: size) }
    }

    /// Blocks of `size` bytes kept for reuse (a test hook).
    static func freeBlockCount(size: Int) -> Int { freeBlocks.withLock { $0[size]?.count ?? 0 } }

    static func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        if let kept = freeBlocks.withLock({ $0[size]?.popLast() }) {
            return UnsafeMutableRawPointer(bitPattern: kept)! + headerBytes
        }
        guard let block = mmap(nil, headerBytes + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              block != MAP_FAILED else { return nil }
        block.storeBytes(of: size, as: Int.self)
        return block + headerBytes
    }

    static func deallocate(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        let block = pointer - headerBytes
        let size = block.load(as: Int.self)
        let kept = freeBlocks.withLock { blocks in
            guard blocks[size, default: []].count < blocksKeptPerSize else { return false }
            blocks[size, default: []].append(UInt(bitPattern: block))
            return true
        }
        if !kept { unmap(block, size: size) }
    }

    static func reallocate(_ pointer: UnsafeMutableRawPointer?, from oldSize: Int, to newSize: Int)
        -> UnsafeMutableRawPointer? {
        guard let moved = allocate(newSize) else { return nil }
        if let pointer {
            moved.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
            deallocate(pointer)
        }
        return moved
    }

    private static func unmap(_ block: UnsafeMutableRawPointer, size: Int) {
        munmap(block, headerBytes + size)
    }
}
