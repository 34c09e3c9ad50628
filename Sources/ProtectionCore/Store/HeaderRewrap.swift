internal import Sodium

/// Rewrites the headers of stored files in place, the way a class change
/// does (the file key rewrapped under the current class key, one header
/// write whatever the file's size), for two jobs that touch every file:
///
/// - after the first passcode, moving class A, B and C files to the new
///   class keys. Until that is done, the previous keys stay in the key bag
///   under the passcode, so a crash loses nothing: the next unlock runs it
///   again (rewrapping a file twice does no harm);
/// - binding version 1 headers to their file's name and owner (version 2).
///   Until every file is done, version 1 headers are still read.
///
/// Files whose class key is not in memory (locked) wait for a later run.
struct HeaderRewrap {
    /// What a run did.
    struct Outcome: Sendable, Equatable {
        /// Headers rewritten.
        var rewrapped = 0
        /// The namespaces of files whose key opens under neither set
        /// (damaged, or made by another key bag): they stay as they are.
        /// Names are not kept: the notice goes to the log.
        var damaged: [String] = []
        /// What could not be rewrapped now (an I/O error, a class key gone
        /// with a lock), as namespace and error code: the rotation stays
        /// pending for it.
        var unfinished: [String] = []

        /// The notice to log, given whether every job it ran for is done.
        func notice(finished: Bool) -> StoreNotice {
            .headersRewritten(rewritten: rewrapped, damaged: damaged, unfinished: unfinished, finished: finished)
        }
    }

    let files: FileStore
    /// Rewrites one file's header if it needs it; true when it did.
    let rewrap: (FileName, Namespace) throws -> Bool

    /// Opens every file (its header says what it needs). A file that could
    /// not be opened for any reason but being gone or damaged counts as
    /// unfinished, so nothing is declared done past a file it skipped.
    func run() -> Outcome {
        var outcome = Outcome()
        let namespaces: [Namespace]
        do {
            namespaces = try files.namespaces()
        } catch {
            outcome.unfinished.append("the store: \(Self.reason(error))")
            return outcome
        }
        for namespace in namespaces {
            let names: [FileName]
            do {
                names = try files.names(in: namespace, prefix: "")
            } catch {
                outcome.unfinished.append("\(namespace): \(Self.reason(error))")
                continue
            }
            for name in names {
                do {
                    if try rewrap(name, namespace) { outcome.rewrapped += 1 }
                } catch let error as ProtectionError where error.code == .notFound {
                    continue  // deleted meanwhile
                } catch let error as ProtectionError where error.code == .integrityFailure {
                    outcome.damaged.append("\(namespace)")
                } catch {
                    outcome.unfinished.append("\(namespace): \(Self.reason(error))")
                }
            }
        }
        return outcome
    }

    /// What went wrong, without a message that may name a file.
    private static func reason(_ error: any Error) -> String {
        (error as? ProtectionError).map { "\($0.code)" } ?? "\(error)"
    }
}

/// Which key generations operations that wrap file keys hold, so the
/// previous keys are dropped only once none still wraps with them
/// (`HeaderRewrap`).
struct KeyUsers {
    private var generation: UInt64 = 0
    private var users: [UInt64: Int] = [:]

    /// The first passcode replaced the class keys.
    mutating func startGeneration() { generation += 1 }

    /// An operation took the current keys; returns their generation.
    mutating func begin() -> UInt64 {
        users[generation, default: 0] += 1
        return generation
    }

    /// The operation that took keys of `generation` is done.
    mutating func end(_ generation: UInt64) {
        users[generation, default: 1] -= 1
        if users[generation] == 0 { users.removeValue(forKey: generation) }
    }

    /// Whether an operation still wraps with keys older than the current ones.
    var olderGenerationInUse: Bool { users.keys.contains { $0 < generation } }
}

/// One operation's hold on the class keys it wraps with; `end()` (or
/// dropping it) lets go, once.
final class KeyUse: @unchecked Sendable {
    private var release: (() -> Void)?

    init(_ release: @escaping () -> Void) { self.release = release }

    func end() {
        let release = self.release
        self.release = nil
        release?()
    }

    deinit { end() }
}
