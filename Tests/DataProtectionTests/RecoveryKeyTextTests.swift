import DataProtection
import Foundation
import ProtectionTestSupport
import Testing

/// The recovery key's text form: what a person copies by hand must come
/// back to the same 32 bytes, and a typo must be caught and placed.
@Suite("Recovery key text")
struct RecoveryKeyTextTests {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")

    static func keys(_ count: Int, seed: UInt64 = 36) -> [RecoveryKey] {
        var generator = SeededGenerator(seed: seed)
        return (0..<count).map { _ in
            try! RecoveryKey(bytes: (0..<RecoveryKey.byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
        } + [try! RecoveryKey(bytes: Array(repeating: 0, count: 32)), try! RecoveryKey(bytes: Array(repeating: 255, count: 32))]
    }

    /// The characters of `key`'s text without dashes (64).
    static func characters(_ key: RecoveryKey) -> [Character] { Array(key.text.filter { $0 != "-" }) }

    /// The error decoding `characters` gives, or nil when it decodes.
    static func failure(_ characters: [Character]) -> DataProtectionError? {
        do {
            _ = try RecoveryKey(text: String(characters))
            return nil
        } catch {
            return error
        }
    }

    /// Whether decoding `characters` fails with `invalidArgument` naming group `group` (from 0).
    static func refused(_ characters: [Character], group: Int) -> Bool {
        guard case .invalidArgument(let message) = failure(characters) else { return false }
        return message.contains("group \(group + 1) ")
    }

    @Test("text is 8 dash-separated groups of 8 base32 characters and reads back to the same bytes")
    func roundTrip() throws {
        for key in Self.keys(200) {
            let groups = key.text.split(separator: "-", omittingEmptySubsequences: false)
            #expect(groups.count == 8)
            #expect(groups.allSatisfy { group in group.count == 8 && group.allSatisfy { Self.alphabet.contains($0) } })
            #expect(try RecoveryKey(text: key.text) == key)
        }
    }

    @Test("case, spaces, dashes and 0 for O, 1 for I do not matter")
    func lenientReading() throws {
        var mapped = 0
        for key in Self.keys(50) {
            let typed = key.text.lowercased().replacingOccurrences(of: "o", with: "0")
                .replacingOccurrences(of: "i", with: "1").replacingOccurrences(of: "-", with: " ")
            if typed.contains("0") || typed.contains("1") { mapped += 1 }
            #expect(try RecoveryKey(text: typed) == key)
            #expect(try RecoveryKey(text: "  " + String(Self.characters(key)) + "\n") == key)
        }
        #expect(mapped > 10)
    }

    @Test("every single wrong character is refused, naming its group")
    func substitutions() {
        for key in Self.keys(3) {
            let characters = Self.characters(key)
            for position in characters.indices {
                for replacement in Self.alphabet where replacement != characters[position] {
                    var typo = characters
                    typo[position] = replacement
                    #expect(Self.refused(typo, group: position / 8), "position \(position) as \(replacement)")
                }
            }
        }
    }

    @Test("two characters of a group swapped are refused, adjacent or not, naming the group")
    func transpositions() {
        for key in Self.keys(20) {
            let characters = Self.characters(key)
            for group in 0..<8 {
                for first in group * 8..<group * 8 + 8 {
                    for second in first + 1..<group * 8 + 8 where characters[first] != characters[second] {
                        var swapped = characters
                        swapped.swapAt(first, second)
                        #expect(Self.refused(swapped, group: group), "\(first) and \(second)")
                    }
                }
            }
        }
    }

    @Test("groups in another order are refused")
    func reorderedGroups() {
        for key in Self.keys(20) {
            let groups = key.text.split(separator: "-").map(Array.init)
            for first in 0..<8 {
                for second in first + 1..<8 where groups[first] != groups[second] {
                    var reordered = groups
                    reordered.swapAt(first, second)
                    #expect(Self.failure(Array(reordered.joined())) != nil, "groups \(first) and \(second)")
                }
            }
        }
    }

    @Test("a group whose three padding bits are not zero is refused, even with a matching check character")
    func paddingBits() {
        let characters = Self.characters(Self.keys(1)[0])
        var tried = 0
        // The 7th character of group 1 holds the last 2 key bits and 3 zero bits.
        for last in Self.alphabet.indices where last & 0b111 != 0 {
            for check in Self.alphabet {
                var padded = characters
                padded[6] = Self.alphabet[last]
                padded[7] = check
                #expect(Self.refused(padded, group: 0))
                tried += 1
            }
        }
        #expect(tried == 28 * 32)
    }

    @Test("a wrong length or a foreign character is refused without repeating the key")
    func malformed() {
        let key = Self.keys(1)[0]
        let characters = Self.characters(key)
        for wrong in [Array(characters.dropLast()), characters + ["A"], []] {
            guard case .invalidArgument(let message) = Self.failure(wrong) else {
                Issue.record("\(wrong.count) characters were accepted")
                continue
            }
            #expect(message.contains("this has \(wrong.count)"))
        }
        var foreign = characters
        foreign[20] = "8"
        guard case .invalidArgument(let message) = Self.failure(foreign) else {
            Issue.record("8 was accepted")
            return
        }
        #expect(message.contains("group 3 "))
        #expect(!message.contains("8") && !message.contains(String(characters[0..<8])))
        #expect(throws: DataProtectionError.self) { try RecoveryKey(bytes: [1, 2, 3]) }
    }

    @Test("description, debugDescription and dump never show the key")
    func redacted() {
        let key = Self.keys(1)[0]
        let hex = key.bytes.map { String(format: "%02x", $0) }.joined()
        var dumped = ""
        dump(key, to: &dumped)
        for shown in ["\(key)", String(reflecting: key), dumped, "\([key])"] {
            #expect(!shown.contains(String(key.text.prefix(8))) && !shown.contains(hex), "\(shown)")
            #expect(!shown.contains("\(key.bytes[0]), \(key.bytes[1])"), "\(shown)")
        }
    }
}
