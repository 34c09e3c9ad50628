import Glibc
import ProtectionTestSupport

/// Puts every timed large-file write on an equal footing. The guest hands
/// free memory back to the hypervisor after a few idle seconds ("memory
/// handed back", under machine), and the first touch of a page handed back
/// costs far more than that of a page freed a moment ago: in run AJ each
/// writer's first repetition ran at a third to a half of its next two (the
/// plain floor 1,716 against 2,768 and 3,151 MiB/s, protd 603 against 1,397
/// and 1,249, age 292 against 1,004 and 870). So before each timed write,
/// untimed, the bench touches and frees twice the file's size, and every
/// writer (protd, the floor, the pipelines, the in-process
/// store, age, gocryptfs) starts from pages the guest has at hand.
enum FreshPages {
    /// Touches `bytes` of new anonymous memory, a byte per page, then frees it.
    static func prepare(bytes: Int) throws {
        guard bytes > 0 else { return }
        guard let memory = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              memory != MAP_FAILED else {
            throw SystemCallFailure("mmap", "\(bytes) bytes to warm")
        }
        defer { munmap(memory, bytes) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        for offset in stride(from: 0, to: bytes, by: page) {
            memory.storeBytes(of: 1, toByteOffset: offset, as: UInt8.self)
        }
    }
}
