/// What a store check (`protctl check`) found: counts, and the problems,
/// each with where it is. Names, paths and sentences only, never key
/// material. The store makes it, the wire carries it (docs/PROTOCOL.md
/// 6.13), the client library returns it.
public struct StoreCheckReport: Sendable, Equatable {
    /// One thing on disk that does not belong or does not verify.
    public struct Problem: Sendable, Equatable {
        /// The uid of the namespace it is in, when known.
        public var uid: UInt32?
        /// Its file (or directory) name in that namespace, when known
        /// (never empty).
        public var name: String?
        /// Its path, relative to the daemon's state directory.
        public var path: String
        /// What is wrong, in one line.
        public var description: String

        /// Makes a problem; an empty name counts as not known.
        public init(uid: UInt32?, name: String?, path: String, description: String) {
            self.uid = uid
            self.name = name?.isEmpty == true ? nil : name
            self.path = path
            self.description = description
        }
    }

    /// Namespace directories (one per uid that stored files).
    public var namespaces: Int
    /// Protected files under names that open where they are.
    public var files: Int
    /// Files whose key slot and header tag were verified with their class key.
    public var verifiedFiles: Int
    /// Files whose class key was not in memory (class A while locked, say):
    /// only their header's form and length were checked.
    public var unverifiableFiles: Int
    /// Every problem found, listed or not.
    public var problemCount: Int
    /// The first problems found; a report may list fewer than it counts.
    public var problems: [Problem]

    /// Makes a report; the defaults are an empty store's.
    public init(namespaces: Int = 0, files: Int = 0, verifiedFiles: Int = 0, unverifiableFiles: Int = 0,
                problemCount: Int = 0, problems: [Problem] = []) {
        self.namespaces = namespaces
        self.files = files
        self.verifiedFiles = verifiedFiles
        self.unverifiableFiles = unverifiableFiles
        self.problemCount = problemCount
        self.problems = problems
    }

    /// Whether nothing was found wrong.
    public var isClean: Bool { problemCount == 0 }
}
