/// Finds glibc's malloc arena heaps, other than the main arena's, in a
/// process's memory map. Each is an anonymous mapping reserved as 64 MiB on
/// a 64 MiB boundary: the part in use is `rw-p`, the rest `---p`.
public enum GlibcArenaHeaps {
    /// glibc's HEAP_MAX_SIZE on 64-bit systems.
    static let heapSize: UInt64 = 64 << 20

    /// How many arena heaps the text of `/proc/PID/maps` shows.
    public static func count(inMaps maps: String) -> Int {
        var mappings: [(start: UInt64, end: UInt64, permissions: Substring)] = []
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            // Anonymous mappings have no sixth field (path).
            guard fields.count == 5 else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16) else {
                continue
            }
            mappings.append((start, end, fields[1]))
        }
        var heaps = 0
        for (index, mapping) in mappings.enumerated()
        where mapping.permissions == "rw-p" && mapping.start % heapSize == 0 {
            let heapEnd = mapping.start + heapSize
            if mapping.end == heapEnd {
                heaps += 1
            } else if index + 1 < mappings.count, mappings[index + 1].start == mapping.end,
                      mappings[index + 1].permissions == "---p", mappings[index + 1].end == heapEnd {
                heaps += 1
            }
        }
        return heaps
    }
}
