#if DEBUG
internal import Glibc

/// A count per thread, for test hooks: tests run in parallel, so a count
/// shared by all threads would mix their work. Debug builds only.
package final class ThreadLocalCounter: Sendable {
    private let key: pthread_key_t

    package init() {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        self.key = key
    }

    /// The calling thread's count.
    package var value: Int { Int(bitPattern: pthread_getspecific(key)) }

    /// Adds `amount` to the calling thread's count.
    package func add(_ amount: Int) { pthread_setspecific(key, UnsafeRawPointer(bitPattern: value + amount)) }
}
#endif
