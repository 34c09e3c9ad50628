internal import Dispatch
internal import Glibc
internal import Synchronization

/// Runs the per-segment work of one operation on every core, or inline.
/// Segments are independent (each has its own nonce and associated data),
/// so sealing or opening a run of them in parallel changes nothing on disk;
/// a single segment, or a cipher fast enough that a thread hop costs about
/// what it saves (`SegmentLayout.spreadsAcrossCores`), runs inline.
enum SegmentParallelism {
    /// CPUs online when the daemon started (at least 1).
    static let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

    /// Calls `body(i)` for every `i` in `0..<count`: concurrently when
    /// `spread` and there are several segments and several cores, and then
    /// every call runs even if one fails and the first error is rethrown;
    /// otherwise inline, in order, and the first error ends the run.
    static func forEach(_ count: Int, spread: Bool, _ body: (Int) throws -> Void) throws {
        if count <= 1 || cores == 1 || !spread {
            for index in 0..<count { try body(index) }
            return
        }
        let firstError = Mutex<(any Error)?>(nil)
        try withoutActuallyEscaping(body) { body in
            // concurrentPerform returns only when every call has ended, and
            // each call works on its own segment, so lending the closure
            // (and the buffers it captures) to the workers is safe.
            let work = UncheckedSendable(body)
            DispatchQueue.concurrentPerform(iterations: count) { index in
                do {
                    try work.value(index)
                } catch {
                    firstError.withLock { if $0 == nil { $0 = error } }
                }
            }
            if let error = firstError.withLock({ $0 }) { throw error }
        }
    }
}

/// A value handed to worker threads that provably finish before the
/// owner goes on (see `SegmentParallelism.forEach`).
private struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
