internal import Glibc
@_spi(CustomByteBufferAllocator) internal import NIOCore
internal import Synchronization

/// ByteBuffers that read a caller's array in place, so a write's content
/// goes to the socket from where the caller holds it instead of being copied
/// into a frame body first (a quarter of the client's CPU per MiB written;
/// docs/DESIGN.md, Writes). The buffer keeps the array's storage alive until
/// NIO frees the buffer, after the socket took its bytes; an array mutated
/// meanwhile gets storage of its own (copy on write), so the bytes sent are
/// the bytes given. The buffers are read-only: nothing may write into them.
enum SharedArrayBuffer {
    /// The allocator behind the shared buffers. `deallocate` lets go of the
    /// array; memory NIO allocates itself through it (never, for buffers
    /// that are only read) comes from malloc.
    private static let allocator = ByteBufferAllocator(
        allocate: { malloc($0) },
        reallocate: { pointer, oldSize, newSize in SharedArrayBuffer.reallocate(pointer, from: oldSize, to: newSize) },
        deallocate: { SharedArrayBuffer.deallocate($0) },
        copy: { destination, source, count in destination.copyMemory(from: source, byteCount: count) })

    /// The arrays shared buffers read, by the address the buffer starts at,
    /// with how many live buffers start there (a caller may send the same
    /// array more than once before the first is sent).
    private static let owners = Mutex<[UInt: (bytes: ArraySlice<UInt8>, buffers: Int)]>([:])

    /// A buffer whose readable bytes are `bytes`, in place. The address is
    /// taken out of `withUnsafeBytes`: a native array's elements stay where
    /// they are while its storage lives and is not written, and the table
    /// keeps the storage alive, so any write by the caller copies it first.
    static func buffer(sharing bytes: ArraySlice<UInt8>) -> ByteBuffer {
        guard !bytes.isEmpty, let start = bytes.withUnsafeBytes({ $0.baseAddress }) else { return ByteBuffer() }
        owners.withLock { owners in
            owners[UInt(bitPattern: start), default: (bytes, 0)].buffers += 1
        }
        return ByteBuffer(takingOwnershipOf: UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(mutating: start),
                                                                            count: bytes.count),
                          allocator: allocator)
    }

    /// Live buffers that start where `bytes` does (a test hook).
    static func liveBuffers(startingAt bytes: ArraySlice<UInt8>) -> Int {
        guard let start = bytes.withUnsafeBytes({ $0.baseAddress }) else { return 0 }
        return owners.withLock { $0[UInt(bitPattern: start)]?.buffers ?? 0 }
    }

    private static func deallocate(_ pointer: UnsafeMutableRawPointer) {
        let wasShared = owners.withLock { owners -> Bool in
            let key = UInt(bitPattern: pointer)
            guard let entry = owners[key] else { return false }
            if entry.buffers == 1 { owners[key] = nil } else { owners[key]!.buffers -= 1 }
            return true
        }
        if !wasShared { free(pointer) }
    }

    private static func reallocate(_ pointer: UnsafeMutableRawPointer?, from oldSize: Int, to newSize: Int)
        -> UnsafeMutableRawPointer? {
        guard let pointer, owners.withLock({ $0[UInt(bitPattern: pointer)] != nil }) else {
            return realloc(pointer, newSize)
        }
        guard let moved = malloc(newSize) else { return nil }
        moved.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
        deallocate(pointer)
        return moved
    }
}
