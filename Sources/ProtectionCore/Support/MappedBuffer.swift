internal import Glibc

/// Large short-lived buffers mapped straight from the kernel and unmapped
/// when freed. From malloc, a freed 4 MiB buffer raises glibc's mmap
/// threshold to its size, so the next ones come from the heap and stay
/// resident after the write that used them: the daemon's RSS rose 16 MiB
/// and stayed there after two direct writes.
package enum MappedBuffer {
    /// `count` zeroed bytes, page aligned.
    package static func allocate(_ count: Int) throws -> UnsafeMutableRawBufferPointer {
        guard let memory = mmap(nil, count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              memory != MAP_FAILED else {
            throw ProtectionError(.ioFailure, "cannot map \(count) bytes of memory: \(String(cString: strerror(errno)))")
        }
        return UnsafeMutableRawBufferPointer(start: memory, count: count)
    }

    /// Unmaps `buffer` (its pages go back to the kernel, which zeroes them
    /// before anyone else sees them).
    package static func free(_ buffer: UnsafeMutableRawBufferPointer) {
        munmap(buffer.baseAddress, buffer.count)
    }
}
