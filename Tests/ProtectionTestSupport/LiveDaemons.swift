internal import Foundation
internal import Synchronization

/// The daemons this process started and has not yet cleaned up, so that an
/// interrupted test run or benchmark does not leave them running, nor their
/// directories (with whatever files they held) in /tmp or /dev/shm.
/// Foundation's `Process` starts each child in a process group of its own,
/// so Ctrl-C in a terminal never reaches them.
///
/// Made on the first registration, it takes over SIGINT and SIGTERM: on either,
/// it kills every registered daemon, removes its directory, then dies of the
/// same signal. A SIGKILL still leaves them behind. On Linux a dispatch
/// signal source installs a handler of its own, so the signals need not be
/// ignored first; children started later therefore still get the default
/// actions (exec resets a caught signal, but keeps an ignored one ignored).
final class LiveDaemons: Sendable {
    static let shared = LiveDaemons()

    private struct Entry {
        var pid: Int32?
        var directory: String
    }

    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])
    /// Kept so that the signal sources live as long as the process (in a
    /// Mutex only because Dispatch's sources are not Sendable).
    private let sources = Mutex<[any DispatchSourceSignal]>([])

    private init() {
        let queue = DispatchQueue(label: "protd.test-support.signals")
        sources.withLock { sources in
            for signalNumber in [SIGINT, SIGTERM] {
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                source.setEventHandler { [unowned self] in cleanUpAndDie(of: signalNumber) }
                source.resume()
                sources.append(source)
            }
        }
    }

    /// Records `owner`'s running daemon; its `directory` is removed with it on a signal.
    func started(_ owner: AnyObject, pid: Int32, directory: String) {
        entries.withLock { $0[ObjectIdentifier(owner)] = Entry(pid: pid, directory: directory) }
    }

    /// Notes that `owner`'s daemon exited; its directory is still removed on a signal.
    func exited(_ owner: AnyObject) {
        entries.withLock { $0[ObjectIdentifier(owner)]?.pid = nil }
    }

    /// Forgets `owner`'s daemon once it has cleaned up after itself.
    func forget(_ owner: AnyObject) {
        _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(owner)) }
    }

    private func cleanUpAndDie(of signalNumber: Int32) {
        let all = entries.withLock { Array($0.values) }
        // Stopped first, so that the rest of this process does not see its
        // daemons go and fail on its own while the directories are removed.
        for pid in all.compactMap(\.pid) { kill(pid, SIGSTOP) }
        for entry in all { try? FileManager.default.removeItem(atPath: entry.directory) }
        for pid in all.compactMap(\.pid) { kill(pid, SIGKILL) }
        // Dies of the signal, as it would have without this, so callers see
        // the same status; the exit is for when a thread keeps it blocked.
        signal(signalNumber, SIG_DFL)
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, signalNumber)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        kill(getpid(), signalNumber)
        usleep(500_000)
        _exit(128 + signalNumber)
    }
}
