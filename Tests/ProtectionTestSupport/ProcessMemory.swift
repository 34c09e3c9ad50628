internal import Foundation
internal import Glibc

/// Counts a byte pattern in another process's memory: every readable
/// mapping in `/proc/PID/maps`, read through `/proc/PID/mem`. Reading a
/// process that is not dumpable (protd) needs `CAP_SYS_PTRACE`.
public enum ProcessMemory {
    /// What one scan read and found.
    public struct Scan: Sendable, CustomStringConvertible {
        /// Occurrences of the pattern (not overlapping).
        public var hits = 0
        /// The mappings they are in (`maps` lines), with their counts.
        public var hitsByMapping: [String: Int] = [:]
        /// Bytes read.
        public var bytesRead = 0
        /// Readable mappings that could not be read (`maps` lines), other
        /// than the kernel's own (`[vvar]`, `[vsyscall]`...).
        public var unreadable: [String] = []

        /// The hits, the bytes read and where the hits are.
        public var description: String {
            let places = hitsByMapping.sorted { $0.value > $1.value }.map { "\($0.value) in \($0.key)" }
            return "\(hits) hits in \(bytesRead) bytes read" + (places.isEmpty ? "" : ": " + places.joined(separator: "; "))
        }
    }

    /// Scans the memory of `pid` for `pattern`. Throws when
    /// `/proc/PID/mem` cannot be opened or read at all.
    public static func scan(pid: Int32, for pattern: [UInt8]) throws -> Scan {
        precondition(!pattern.isEmpty, "an empty pattern matches everywhere")
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let fd = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemCallFailure("open", "/proc/\(pid)/mem") }
        defer { close(fd) }
        var scan = Scan()
        var buffer = [UInt8](repeating: 0, count: chunkBytes + pattern.count)
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].hasPrefix("r") else { continue }
            if fields.count > 5, kernelMappings.contains(String(fields[5])) { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2,
                  let hits = count(pattern, in: bounds[0]..<bounds[1], of: fd, buffer: &buffer, read: &scan.bytesRead) else {
                scan.unreadable.append(String(line))
                continue
            }
            scan.hits += hits
            if hits > 0 { scan.hitsByMapping[String(line), default: 0] += hits }
        }
        guard scan.bytesRead > 0 else {
            throw SystemCallFailure("read", "/proc/\(pid)/mem (no mapping was readable)", errno: EIO)
        }
        return scan
    }

    /// Mappings of the kernel's that `/proc/PID/mem` does not read.
    private static let kernelMappings: Set<String> = ["[vvar]", "[vvar_vclock]", "[vsyscall]"]
    private static let chunkBytes = 4 << 20

    /// Occurrences of `pattern` in `range` of the memory open in `fd`, read
    /// a chunk at a time (each chunk keeps the previous one's last
    /// `pattern.count - 1` bytes in front, so no occurrence is cut); nil
    /// when the range cannot be read.
    private static func count(_ pattern: [UInt8], in range: Range<UInt64>, of fd: Int32, buffer: inout [UInt8],
                              read total: inout Int) -> Int? {
        let keep = pattern.count - 1
        var carried = 0
        var hits = 0
        var address = range.lowerBound
        while address < range.upperBound {
            let wanted = Int(min(UInt64(chunkBytes), range.upperBound - address))
            let read = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + carried, wanted, Int(bitPattern: UInt(address))) }
            guard read > 0 else { return nil }
            total += read
            address += UInt64(read)
            let filled = carried + read
            var searched = 0
            buffer.withUnsafeBytes { bytes in
                pattern.withUnsafeBytes { needle in
                    while let found = find(needle, in: UnsafeRawBufferPointer(rebasing: bytes[searched..<filled])) {
                        hits += 1
                        searched += found + needle.count
                    }
                }
            }
            // Carry the tail that could start an occurrence, but never bytes of one already counted.
            carried = min(keep, filled - searched)
            buffer.withUnsafeMutableBytes { bytes in
                _ = memmove(bytes.baseAddress!, bytes.baseAddress! + filled - carried, carried)
            }
        }
        return hits
    }

    /// Where `needle` first occurs in `haystack` (glibc's `memmem` is a GNU
    /// extension Swift's Glibc module does not show).
    private static func find(_ needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var start = 0
        let last = haystack.count - needle.count
        while start <= last {
            guard let candidate = memchr(haystack.baseAddress! + start, Int32(needle[0]), last - start + 1) else { return nil }
            let offset = haystack.baseAddress!.distance(to: UnsafeRawPointer(candidate))
            if memcmp(candidate, needle.baseAddress!, needle.count) == 0 { return offset }
            start = offset + 1
        }
        return nil
    }
}
