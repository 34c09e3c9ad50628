internal import Glibc

/// Key work whose new keys die with it, such as a small file's read, which
/// unwraps the file key, derives the header key, opens the content and wipes
/// them all, with no I/O in between.
///
/// Every secret of at most one slab slot that the calling thread makes
/// inside `run` lives in guarded scratch memory (`sodium_malloc`: guard
/// pages, `mlock`, out of core dumps) that stays read-write, as AES round
/// keys already do, instead of in a slab. Making, reading and wiping it then
/// change no page protection, and the only key memory the work opens is what
/// it reads, read-only: the class key's slab. Without it, each of those keys
/// makes its slab writable and then `PROT_NONE` again, and when the class
/// key's slab is full (many open handles), that is another slab for each.
/// Every such secret is wiped when `run` ends, however it ends, so none
/// outlives the work in memory that is not `PROT_NONE`.
package enum TransientSecrets {
    /// The secrets one `run` made, to wipe when it ends.
    final class Scope {
        fileprivate var secrets: [SecretBytes] = []

        /// Takes `secret` into the scope, to be wiped with it.
        func adopt(_ secret: SecretBytes) { secrets.append(secret) }
    }

    /// The calling thread's innermost scope, as an unretained `Scope`.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        // Without a key of its own, `current` would read another's value as a scope.
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key left for transient secrets")
        return key
    }()

    /// Runs `body`, synchronous key work with no I/O and no wait; the
    /// secrets made meanwhile on this thread are transient (see above).
    package static func run<R>(_ body: () throws -> R) rethrows -> R {
        let scope = Scope()
        let outer = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(scope).toOpaque())
        defer {
            pthread_setspecific(key, outer)
            for secret in scope.secrets { secret.wipe() }
        }
        return try withExtendedLifetime(scope) { try body() }
    }

    /// The scope the calling thread is in, if any.
    static var current: Scope? {
        pthread_getspecific(key).map { Unmanaged<Scope>.fromOpaque($0).takeUnretainedValue() }
    }
}
