internal import NIOCore

/// The answer to `check` (docs/PROTOCOL.md 6.13): counts, and the first
/// problems found in the daemon's store.
public struct WireCheckReport: Sendable, Equatable {
    /// One problem: where it is, and what is wrong.
    public struct Problem: Sendable, Equatable {
        /// The uid of the namespace it is in, when known.
        public var uid: UInt32?
        /// Its name in that namespace, when known (never empty).
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

        /// Its bytes on the wire.
        fileprivate var byteCount: Int {
            5 + [name ?? "", path, description].reduce(0) { $0 + 2 + min($1.utf8.count, Int(UInt16.max)) }
        }
    }

    /// Namespace directories.
    public var namespaces: UInt64
    /// Protected files.
    public var files: UInt64
    /// Files whose key slot and header tag were verified.
    public var verifiedFiles: UInt64
    /// Files whose class key was not in memory.
    public var unverifiableFiles: UInt64
    /// Every problem found, listed or not.
    public var problemCount: UInt64
    /// The first problems found.
    public var problems: [Problem]

    /// Bytes of problems one answer holds at most: it fits every frame
    /// limit a daemon may announce.
    public static let problemByteLimit = WireProtocol.minimumChunkSize

    /// Makes a report.
    public init(namespaces: UInt64, files: UInt64, verifiedFiles: UInt64, unverifiableFiles: UInt64,
                problemCount: UInt64, problems: [Problem]) {
        self.namespaces = namespaces
        self.files = files
        self.verifiedFiles = verifiedFiles
        self.unverifiableFiles = unverifiableFiles
        self.problemCount = problemCount
        self.problems = problems
    }

    /// This report listing only the first problems that fit in `problemByteLimit` bytes.
    public func fitted() -> WireCheckReport {
        var fitted = self
        var bytes = 0
        fitted.problems = Array(problems.prefix { problem in
            bytes += problem.byteCount
            return bytes <= Self.problemByteLimit
        })
        return fitted
    }

    func encode(into buffer: inout ByteBuffer) {
        for count in [namespaces, files, verifiedFiles, unverifiableFiles, problemCount] {
            buffer.writeInteger(count, endianness: .big)
        }
        buffer.writeInteger(UInt32(problems.count), endianness: .big)
        for problem in problems {
            buffer.writeInteger(UInt8(problem.uid == nil ? 0 : 1))
            buffer.writeInteger(problem.uid ?? 0, endianness: .big)
            buffer.writeWireString(problem.name ?? "")
            buffer.writeWireString(problem.path)
            buffer.writeWireString(problem.description)
        }
    }

    static func decode(from buffer: inout ByteBuffer) throws -> WireCheckReport {
        var report = WireCheckReport(namespaces: try buffer.readWireInteger("namespaces"),
                                     files: try buffer.readWireInteger("files"),
                                     verifiedFiles: try buffer.readWireInteger("verified files"),
                                     unverifiableFiles: try buffer.readWireInteger("unverifiable files"),
                                     problemCount: try buffer.readWireInteger("problem count"), problems: [])
        let listed: UInt32 = try buffer.readWireInteger("listed problems")
        guard UInt64(listed) <= report.problemCount else {
            throw ProtocolViolation("\(listed) problems listed of \(report.problemCount) found")
        }
        for _ in 0..<listed {
            let uidKnown = try buffer.readWireBool("uid known")
            let uid: UInt32 = try buffer.readWireInteger("uid")
            guard uidKnown || uid == 0 else { throw ProtocolViolation("a problem's unknown uid is not 0") }
            report.problems.append(Problem(uid: uidKnown ? uid : nil, name: try buffer.readWireString("name"),
                                           path: try buffer.readWireString("path"),
                                           description: try buffer.readWireString("description")))
        }
        return report
    }
}
