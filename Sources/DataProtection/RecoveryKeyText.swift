/// The text form of a recovery key: 8 groups of 8 characters. Group `g`
/// holds key bytes `4g..<4g+4` as 7 RFC 4648 base32 characters (32 bits
/// and 3 zero bits), then a check character:
///
///     check = α¹·g + α²·c₀ + α³·c₁ + … + α⁸·c₆   in GF(32) = GF(2)[x]/(x⁵ + x² + 1), α = x
///
/// The weights α⁰ (the check's own) to α⁸ are distinct and non-zero, so the
/// check catches any one wrong character in a group, any two characters
/// of a group swapped, and a group moved to another place.
enum RecoveryKeyText {
    static let byteCount = 32
    static let groups = 8
    private static let bytesPerGroup = 4
    private static let charactersPerGroup = 8
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// `bytes` (`byteCount` of them) as text, groups joined by dashes.
    static func encode(_ bytes: [UInt8]) -> String {
        (0..<groups).map { group in
            let value = bytes[group * bytesPerGroup..<(group + 1) * bytesPerGroup].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let symbols = (0..<7).map { UInt8(truncatingIfNeeded: (value << 3) >> UInt64(30 - 5 * $0)) & 31 }
            let characters = (symbols + [check(group: group, symbols)]).map { alphabet[Int($0)] }
            return String(decoding: characters, as: UTF8.self)
        }.joined(separator: "-")
    }

    /// The bytes `text` stands for; `invalidArgument` naming the group with
    /// a typo, or saying how many characters there were.
    static func decode(_ text: String) throws(DataProtectionError) -> [UInt8] {
        var symbols: [UInt8] = []
        for scalar in text.unicodeScalars where scalar != "-" && !scalar.properties.isWhitespace {
            guard let symbol = symbol(scalar) else {
                // The character itself is not repeated: it is part of a secret.
                throw .invalidArgument("group \(symbols.count / charactersPerGroup + 1) of the recovery key has a "
                                       + "character that is not in one (A-Z, 2-7); check it for a typo")
            }
            symbols.append(symbol)
        }
        guard symbols.count == groups * charactersPerGroup else {
            throw .invalidArgument("a recovery key has \(groups * charactersPerGroup) characters in \(groups) groups "
                                   + "of \(charactersPerGroup); this has \(symbols.count)")
        }
        var bytes: [UInt8] = []
        for group in 0..<groups {
            let data = Array(symbols[group * charactersPerGroup..<group * charactersPerGroup + 7])
            guard check(group: group, data) == symbols[group * charactersPerGroup + 7], data[6] & 0b111 == 0 else {
                throw .invalidArgument("group \(group + 1) of the recovery key is wrong; check it for a typo")
            }
            let value = data.reduce(UInt64(0)) { $0 << 5 | UInt64($1) } >> 3
            bytes += (0..<bytesPerGroup).map { UInt8(truncatingIfNeeded: value >> UInt64(24 - 8 * $0)) }
        }
        return bytes
    }

    /// The check character of group `group` whose data characters are `symbols`.
    static func check(group: Int, _ symbols: [UInt8]) -> UInt8 {
        var weight: UInt8 = 1
        var sum: UInt8 = 0
        for symbol in [UInt8(group)] + symbols {
            weight = multiply(weight, 2)
            sum ^= multiply(weight, symbol)
        }
        return sum
    }

    /// `a · b` in GF(32), reduced by x⁵ + x² + 1.
    private static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        var (a, b, product) = (a, b, UInt8(0))
        while b != 0 {
            if b & 1 == 1 { product ^= a }
            b >>= 1
            a <<= 1
            if a & 0b10_0000 != 0 { a ^= 0b10_0101 }
        }
        return product
    }

    /// The value of one character: case-insensitive, `0` as `O`, `1` as `I`.
    private static func symbol(_ scalar: Unicode.Scalar) -> UInt8? {
        guard scalar.isASCII else { return nil }
        var byte = UInt8(scalar.value)
        if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { byte -= 32 }
        if byte == UInt8(ascii: "0") { byte = UInt8(ascii: "O") }
        if byte == UInt8(ascii: "1") { byte = UInt8(ascii: "I") }
        return alphabet.firstIndex(of: byte).map(UInt8.init)
    }
}
