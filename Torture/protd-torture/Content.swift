/// The content of one whole-file write: a header line naming the file and
/// the version, then a fill derived from both, so that a read shows
/// whether it holds one whole version and which.
enum VersionContent {
    /// Version 0 is the empty file a create leaves.
    static func bytes(name: String, version: Int, length: Int) -> [UInt8] {
        guard version > 0 else { return [] }
        var out = Array("protd-torture \(name) v\(version) n\(length)\n".utf8)
        out.reserveCapacity(out.count + length)
        var state = seed(name: name, version: version)
        var remaining = length
        while remaining > 0 {
            state = next(state)
            var word = state
            for _ in 0..<min(8, remaining) {
                out.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
            remaining -= min(8, remaining)
        }
        return out
    }

    /// The version `data` holds in full for `name`, or nil when it is not
    /// exactly one version of that name (torn, mixed, another file's).
    static func version(of data: [UInt8], name: String) -> Int? {
        if data.isEmpty { return 0 }
        guard let newline = data.prefix(512).firstIndex(of: 0x0A),
              let header = String(validating: data[..<newline], as: UTF8.self) else { return nil }
        let fields = header.split(separator: " ")
        guard fields.count == 4, fields[0] == "protd-torture", fields[1] == name,
              fields[2].hasPrefix("v"), let version = Int(fields[2].dropFirst()), version > 0,
              fields[3].hasPrefix("n"), let length = Int(fields[3].dropFirst()) else { return nil }
        return bytes(name: name, version: version, length: length) == data ? version : nil
    }

    private static func seed(name: String, version: Int) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash ^ UInt64(version) &* 0x9e37_79b9_7f4a_7c15
    }

    private static func next(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// SplitMix64: reproducible randomness from `--seed`.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
