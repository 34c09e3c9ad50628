internal import ProtectionWire

/// What `DataProtectionClient.checkStore()` found in the daemon's store:
/// counts, and the problems, each with where it is.
public struct StoreCheckReport: Sendable, Equatable {
    /// One thing on disk that does not belong or does not verify.
    public struct Problem: Sendable, Equatable {
        /// The uid of the namespace it is in, when known.
        public var uid: UInt32?
        /// Its file (or directory) name in that namespace, when known.
        public var name: String?
        /// Its path, relative to the daemon's state directory.
        public var path: String
        /// What is wrong, in one line.
        public var description: String
    }

    /// Namespace directories (one per uid that stored files).
    public var namespaces: Int
    /// Protected files.
    public var files: Int
    /// Files whose key slot and header tag were verified with their class key.
    public var verifiedFiles: Int
    /// Files whose class key was not in memory (class A while locked, say):
    /// only their header's form and length were checked.
    public var unverifiableFiles: Int
    /// Every problem found; `problems` may list fewer.
    public var problemCount: Int
    /// The first problems found, as many as one answer holds.
    public var problems: [Problem]

    /// Whether nothing was found wrong.
    public var isClean: Bool { problemCount == 0 }
}

extension StoreCheckReport {
    init(_ wire: WireCheckReport) {
        self.init(namespaces: Int(clamping: wire.namespaces), files: Int(clamping: wire.files),
                  verifiedFiles: Int(clamping: wire.verifiedFiles), unverifiableFiles: Int(clamping: wire.unverifiableFiles),
                  problemCount: Int(clamping: wire.problemCount),
                  problems: wire.problems.map {
                      Problem(uid: $0.uid, name: $0.name, path: $0.path, description: $0.description)
                  })
    }
}
