internal import Foundation

/// A process's /proc/PID/stat line, parsed. The command name sits in
/// parentheses and may itself hold spaces and parentheses, so the fields
/// are those after the last ")".
public struct ProcessStat: Sendable {
    /// The command name (at most 15 characters, as the kernel keeps it).
    public let command: String
    /// Fields 3 (state) onwards, numbered as in proc(5) less 3.
    private let fields: [Substring]

    /// The stat line of `pid`, or nil when it cannot be read (no such process).
    public init?(pid: Int32) {
        guard let line = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let open = line.firstIndex(of: "("), let close = line.lastIndex(of: ")") else { return nil }
        command = String(line[line.index(after: open)..<close])
        fields = line[line.index(after: close)...].split(separator: " ")
    }

    /// Field 3: the state letter (`R`, `S`, `T` for stopped...).
    public var state: Character? { field(3)?.first }

    /// Field 4: the parent's process id.
    public var parentPID: Int32? { field(4).flatMap { Int32($0) } }

    /// Fields 14 and 15: user plus system CPU time in seconds, at the
    /// kernel's clock tick (10 ms).
    public var cpuSeconds: Double? {
        guard let user = field(14).flatMap({ Double($0) }), let system = field(15).flatMap({ Double($0) }) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    private func field(_ number: Int) -> Substring? {
        fields.indices.contains(number - 3) ? fields[number - 3] : nil
    }
}
