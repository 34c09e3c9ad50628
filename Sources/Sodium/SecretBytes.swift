internal import CSodium
internal import Glibc

/// The only owner of key material in protd.
///
/// The bytes live in libsodium guarded memory (`sodium_malloc`: guard pages,
/// canary, `mlock`, excluded from core dumps) and are kept `PROT_NONE` while
/// nobody reads them. `wipe()` zeroes every byte the secret owns and refuses
/// any later use; `deinit` goes through the same wipe before the memory is
/// given back. The bytes are reachable only through `package` accessors, so
/// no client of the package can copy them out.
///
/// Small secrets (at most 64 bytes: file keys, class keys, X25519 secret
/// keys) share slabs: one guarded region holds 1023 of them, one 64-byte slot
/// each (`GuardedSlabAllocator`). Larger secrets get an allocation of their
/// own. The trade, stated plainly: page protection works per region, so
/// while any secret in a slab is being read, every other secret in that slab
/// is readable too, and while one is being filled or wiped, all of them are
/// writable. One allocation per secret avoided that but cost about 8 KiB of
/// resident memory and five syscalls (mmap, mprotect, mlock, munlock,
/// munmap) per open file for a 32-byte key; a slot costs 64 bytes and, when
/// its slab is already in use, no syscall. Guard pages, canary, `mlock`,
/// dump exclusion and zeroing on wipe are unchanged, and nested or
/// overlapping reads of secrets in one slab share one `mprotect` pair.
/// Secrets read or filled for a long time (Argon2id's passcode and output)
/// take an allocation of their own so they do not hold a slab open. Small
/// secrets made inside a `TransientSecrets` scope take read-write scratch
/// memory instead, and are wiped when the scope ends.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The number of secret bytes.
    public let count: Int

    // `storage` never changes after init; `readers` and `wiped` are guarded
    // by `mutex`.
    private let storage: SecretStorage
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let readersDone = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var readers = 0
    private var wiped = false
    /// Test hook: told, at the end of every wipe, whether every byte the
    /// secret owns (its whole slot or allocation) read back as zero.
    package let wipeObserver: (@Sendable (_ allZero: Bool) -> Void)?

    /// Allocates `count` guarded bytes and lets `fill` write them once.
    /// The memory is zeroed first; if `fill` throws, it is wiped and freed.
    package convenience init(
        count: Int,
        wipeObserver: (@Sendable (_ allZero: Bool) -> Void)? = nil,
        fill: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws {
        try self.init(count: count, placement: .automatic(.shared), wipeObserver: wipeObserver, fill: fill)
    }

    /// The one designated initialiser: `placement` says where the bytes go
    /// (tests pass their own slab allocator).
    init(
        count: Int,
        placement: SecretStorage.Placement,
        wipeObserver: (@Sendable (_ allZero: Bool) -> Void)? = nil,
        fill: (UnsafeMutableRawBufferPointer) throws -> Void
    ) throws {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(readersDone, nil)
        let storage: SecretStorage
        // Inside a `TransientSecrets.run`, a secret that would take a slab slot takes a scratch.
        let scope: TransientSecrets.Scope? = if case .automatic = placement { TransientSecrets.current } else { nil }
        do {
            try SodiumRuntime.ensureInitialised()
            guard count > 0 else {
                throw SodiumError(.invalidLength, "a secret has at least one byte")
            }
            storage = try SecretStorage(count: count, placement: scope == nil ? placement : .transientScratch)
        } catch {
            Self.release(mutex, readersDone)
            throw error
        }
        self.wipeObserver = wipeObserver
        self.count = count
        self.storage = storage
        // Every property is set: if `fill` throws, deinit wipes and frees.
        try Self.keyWindow {
            Self.countSlabWrite(storage)
            storage.region.beginWrite()
            defer { storage.region.endWrite() }
            sodium_memzero(storage.pointer, storage.capacity)
            try fill(UnsafeMutableRawBufferPointer(start: storage.pointer, count: count))
        }
        scope?.adopt(self)
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
    /// may overlap, on this secret or on others in its slab; the memory goes
    /// back to `PROT_NONE` when the last of them ends.
    /// Throws `secretWiped` once `wipe()` has run.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        pthread_mutex_lock(mutex)
        if wiped {
            pthread_mutex_unlock(mutex)
            throw SodiumError(.secretWiped, "this key was wiped and can no longer be used")
        }
        if readers == 0 { storage.region.beginRead() }
        readers += 1
        pthread_mutex_unlock(mutex)
        defer {
            pthread_mutex_lock(mutex)
            readers -= 1
            if readers == 0 {
                storage.region.endRead()
                pthread_cond_broadcast(readersDone)
            }
            pthread_mutex_unlock(mutex)
        }
        return try Self.keyWindow { try body(UnsafeRawBufferPointer(start: storage.pointer, count: count)) }
    }

    /// A copy of `secret` in a guarded allocation of its own that stays
    /// readable until the copy is freed, so reading it changes no page
    /// protection. For keys that every request uses and that guard nothing
    /// beyond what is in memory in every lock state anyway: the store's
    /// name keys, derived from class D (docs/SECURITY.md, "How secrets are
    /// handled"). The copy is still locked in RAM, between guard pages, out
    /// of core dumps, and zeroed by `wipe()`.
    package static func pinnedReadableCopy(of secret: SecretBytes) throws -> SecretBytes {
        let copy = try SecretBytes(count: secret.count, placement: .ownAllocation) { out in
            try secret.withUnsafeBytes { out.copyMemory(from: $0) }
        }
        // Never ended: the region is freed, readable, with the copy.
        copy.storage.region.beginRead()
        return copy
    }

    /// Holds this secret's slab writable while `body` runs: key work that
    /// creates, reads and wipes several keys in the slab (opening a file:
    /// unwrapping its key, checking the header tag) then changes page
    /// protection once instead of once per key. `body` does crypto only,
    /// never disk I/O or a wait: every key in the slab is writable while
    /// it runs (docs/SECURITY.md).
    package func withSlabWritable<R>(_ body: () throws -> R) rethrows -> R {
        try Self.keyWindow {
            Self.countSlabWrite(storage)
            storage.region.beginWrite()
            defer { storage.region.endWrite() }
            return try body()
        }
    }

    /// Zeroes every byte the secret owns now and refuses all later use.
    /// Waits for readers that are already inside `withUnsafeBytes`, so nobody
    /// ever computes with a half-wiped key. Calling it twice is harmless.
    public func wipe() {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if wiped { return }
        wiped = true
        while readers > 0 { pthread_cond_wait(readersDone, mutex) }
        let allZero = Self.keyWindow {
            Self.countSlabWrite(storage)
            storage.region.beginWrite()
            defer { storage.region.endWrite() }
            sodium_memzero(storage.pointer, storage.capacity)
            return wipeObserver == nil
                || sodium_is_zero(storage.pointer.assumingMemoryBound(to: UInt8.self), storage.capacity) == 1
        }
        wipeObserver?(allZero)
    }

    /// Whether `wipe()` has run.
    public var isWiped: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return wiped
    }

    #if DEBUG
    /// A copy of the raw bytes, wiped or not, for tests that check a wipe
    /// really zeroed the memory. Debug builds only.
    package func rawContentsForTesting() -> [UInt8] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        storage.region.beginRead()
        defer { storage.region.endRead() }
        return Array(UnsafeRawBufferPointer(start: storage.pointer, count: count))
    }
    #endif

    /// Where the bytes live (a test hook).
    var storageForTesting: SecretStorage { storage }

    /// How many secrets live in how many shared slabs right now (a test and
    /// benchmark hook; never shows any bytes).
    package static var slabStatistics: GuardedSlabStatistics { GuardedSlabAllocator.shared.statistics }

    #if DEBUG
    /// How many key windows (`withUnsafeBytes`, a fill, a wipe) the calling
    /// thread has open right now, over every secret.
    /// Debug builds only: a test hook for the rule that no window spans
    /// disk I/O (`Posix`).
    package static var keyWindowsOpenOnThisThread: Int { windowsOnThisThread.value }

    private static let windowsOnThisThread = ThreadLocalCounter()

    /// How many times the calling thread has made a shared slab writable
    /// (to fill or wipe a secret in it, or `withSlabWritable`). Debug
    /// builds only: a test hook for reads that only read key memory.
    package static var slabWritesOnThisThread: Int { slabWrites.value }

    private static let slabWrites = ThreadLocalCounter()
    #endif

    /// Counts a slab made writable on this thread (debug builds).
    private static func countSlabWrite(_ storage: SecretStorage) {
        #if DEBUG
        if storage.isInSlab { slabWrites.add(1) }
        #endif
    }

    /// Runs `body`, a key window: the time the bytes are readable or
    /// writable for the calling thread (counted in debug builds).
    private static func keyWindow<R>(_ body: () throws -> R) rethrows -> R {
        #if DEBUG
        windowsOnThisThread.add(1)
        defer { windowsOnThisThread.add(-1) }
        #endif
        return try body()
    }

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
        // The wipe zeroed the whole slot or allocation, as release requires.
        wipe()
        storage.release()
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
