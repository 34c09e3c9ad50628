internal import NIOCore
public import ProtectionModel

/// The answer to `check` (docs/PROTOCOL.md 6.13) on the wire: counts as
/// u64, and the first problems found in the daemon's store.
extension StoreCheckReport {
    /// Bytes of problems one answer holds at most: it fits every frame
    /// limit a daemon may announce.
    public static let problemByteLimit = WireProtocol.minimumChunkSize

    /// This report listing only the first problems that fit in `problemByteLimit` bytes.
    public func fitted() -> StoreCheckReport {
        var fitted = self
        var bytes = 0
        fitted.problems = Array(problems.prefix { problem in
            bytes += Self.byteCount(of: problem)
            return bytes <= Self.problemByteLimit
        })
        return fitted
    }

    /// A problem's bytes on the wire.
    private static func byteCount(of problem: Problem) -> Int {
        5 + [problem.name ?? "", problem.path, problem.description].reduce(0) { $0 + 2 + min($1.utf8.count, Int(UInt16.max)) }
    }

    func encode(into buffer: inout ByteBuffer) {
        for count in [namespaces, files, verifiedFiles, unverifiableFiles, problemCount] {
            buffer.writeInteger(UInt64(clamping: count), endianness: .big)
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

    static func decode(from buffer: inout ByteBuffer) throws -> StoreCheckReport {
        func count(_ what: String) throws -> Int { Int(clamping: try buffer.readWireInteger(what) as UInt64) }
        var report = StoreCheckReport(namespaces: try count("namespaces"), files: try count("files"),
                                      verifiedFiles: try count("verified files"),
                                      unverifiableFiles: try count("unverifiable files"),
                                      problemCount: try count("problem count"))
        let listed: UInt32 = try buffer.readWireInteger("listed problems")
        guard Int(listed) <= report.problemCount else {
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
