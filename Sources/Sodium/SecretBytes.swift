internal import CSodium
internal import Glibc

/// The only owner of key material in protd.
///
/// The bytes live in libsodium guarded memory (`sodium_malloc`: guard pages,
/// `mlock`, excluded from core dumps) and are kept `PROT_NONE` while nobody
/// reads them. `wipe()` zeroes the whole allocation and refuses any later use;
/// `deinit` goes through the same wipe before `sodium_free`. The bytes are
/// reachable only through `package` accessors, so no client of the package
/// can copy them out.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The number of secret bytes.
    public let count: Int

    // Guarded by `mutex`; `pointer` itself never changes after init.
    private let pointer: UnsafeMutableRawPointer
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let readersDone = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var readers = 0
    private var wiped = false
    /// Test hook: told, at the end of every wipe, whether every byte of the
    /// allocation read back as zero.
    package let wipeObserver: (@Sendable (_ allZero: Bool) -> Void)?

    /// Allocates `count` guarded bytes and lets `fill` write them once.
    /// The memory is zeroed first; if `fill` throws, it is wiped and freed.
    package init(
        count: Int,
        wipeObserver: (@Sendable (_ allZero: Bool) -> Void)? = nil,
        fill: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws {
        self.wipeObserver = wipeObserver
        try SodiumRuntime.ensureInitialised()
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(readersDone, nil)
        guard count > 0 else {
            Self.release(mutex, readersDone)
            throw SodiumError(.invalidLength, "a secret has at least one byte")
        }
        guard let memory = sodium_malloc(count) else {
            Self.release(mutex, readersDone)
            throw SodiumError(.allocationFailed, "could not allocate \(count) bytes of guarded memory")
        }
        sodium_memzero(memory, count)
        self.count = count
        self.pointer = memory
        // Every property is set: if `fill` throws, deinit wipes and frees.
        defer { sodium_mprotect_noaccess(memory) }
        try fill(UnsafeMutableRawBufferPointer(start: memory, count: count))
    }

    /// A new secret of `count` bytes from libsodium's CSPRNG.
    public static func random(count: Int) throws -> SecretBytes {
        try SecretBytes(count: count) { buffer in
            randombytes_buf(buffer.baseAddress!, buffer.count)
        }
    }

    /// Copies `bytes` into guarded memory. The caller stays responsible for
    /// zeroing its own copy.
    package convenience init(copying bytes: UnsafeRawBufferPointer) throws {
        try self.init(count: bytes.count) { buffer in
            buffer.copyMemory(from: bytes)
        }
    }

    /// Copies a string's UTF-8 bytes (a passcode) into guarded memory. Swift
    /// strings cannot be zeroed, so callers should drop theirs quickly.
    public convenience init(utf8 string: String) throws {
        var copy = Array(string.utf8)
        defer { copy.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) } }
        guard !copy.isEmpty else {
            throw SodiumError(.invalidLength, "a secret cannot be empty")
        }
        try self.init(count: copy.count) { buffer in
            copy.withUnsafeBytes { buffer.copyMemory(from: $0) }
        }
    }

    /// Lends the bytes read-only for the duration of `body`. Several readers
    /// may overlap; the memory goes back to `PROT_NONE` when the last ends.
    /// Throws `secretWiped` once `wipe()` has run.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        pthread_mutex_lock(mutex)
        if wiped {
            pthread_mutex_unlock(mutex)
            throw SodiumError(.secretWiped, "this key was wiped and can no longer be used")
        }
        if readers == 0 { sodium_mprotect_readonly(pointer) }
        readers += 1
        pthread_mutex_unlock(mutex)
        defer {
            pthread_mutex_lock(mutex)
            readers -= 1
            if readers == 0 {
                sodium_mprotect_noaccess(pointer)
                pthread_cond_broadcast(readersDone)
            }
            pthread_mutex_unlock(mutex)
        }
        return try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Zeroes every byte now and refuses all later use. Waits for readers
    /// that are already inside `withUnsafeBytes`, so nobody ever computes
    /// with a half-wiped key. Calling it twice is harmless.
    public func wipe() {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if wiped { return }
        wiped = true
        while readers > 0 { pthread_cond_wait(readersDone, mutex) }
        sodium_mprotect_readwrite(pointer)
        sodium_memzero(pointer, count)
        if let wipeObserver {
            wipeObserver(sodium_is_zero(pointer.assumingMemoryBound(to: UInt8.self), count) == 1)
        }
        sodium_mprotect_noaccess(pointer)
    }

    /// Whether `wipe()` has run.
    public var isWiped: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return wiped
    }

    #if DEBUG
    /// A copy of the raw allocation, wiped or not, for tests that check a
    /// wipe really zeroed the memory. Debug builds only.
    package func rawContentsForTesting() -> [UInt8] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        sodium_mprotect_readonly(pointer)
        defer { if readers == 0 { sodium_mprotect_noaccess(pointer) } }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
    #endif

    /// Constant-time equality of two secrets of the same length.
    public func constantTimeEquals(_ other: SecretBytes) throws -> Bool {
        guard count == other.count else { return false }
        if other === self { return true }
        return try withUnsafeBytes { mine in
            try other.withUnsafeBytes { theirs in
                sodium_memcmp(mine.baseAddress!, theirs.baseAddress!, count) == 0
            }
        }
    }

    /// Never shows the bytes.
    public var description: String { "SecretBytes(\(count) bytes, redacted)" }
    /// Never shows the bytes.
    public var debugDescription: String { description }

    deinit {
        wipe()
        // sodium_free checks the canary inside the protected page.
        sodium_mprotect_readwrite(pointer)
        sodium_free(pointer)
        Self.release(mutex, readersDone)
    }

    private static func release(
        _ mutex: UnsafeMutablePointer<pthread_mutex_t>,
        _ condition: UnsafeMutablePointer<pthread_cond_t>
    ) {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }
}
