import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Testing

/// Names are checked as the bytes the kernel reads: a combining mark, a
/// joiner or a prepend character next to `/` or `.` changes Swift's
/// characters but not the path the kernel resolves.
@Suite("File names as bytes")
struct NameBytesPropertyTests {
    /// Pieces a name is built from: path syntax, and the characters that
    /// merge with a neighbour into one grapheme cluster.
    static let pieces = ["/", ".", "..", "a", "b", "\u{301}", "\u{200D}", "\u{600}", "\u{1F1FA}", "\u{FE0F}", "é", "x\u{301}"]

    @Test("the exact escape seen in review is refused: ../ followed by a combining mark")
    func combiningMarkAfterDotDot() {
        for name in ["../\u{301}hidden", "/\u{301}etc/passwd", "a/..\u{200D}/b".replacingOccurrences(of: "\u{200D}", with: ""),
                     "\u{600}/../x"] {
            let error = #expect(throws: ProtectionError.self, "\(name.unicodeScalars.map { $0.value })") { try FileName(name) }
            #expect(error?.code == .invalidName)
        }
    }

    @Test("every accepted name, written through the store, lands inside the namespace's files directory")
    func acceptedNamesStayInside() throws {
        let fixture = try StoreFixture(segmentSize: 1024)
        let files = try fixture.filesDirectory()
        let layout = try fixture.layout()
        var random = SeededGenerator(seed: 0x5EED_0F_B17E5)
        var accepted = 0
        for _ in 0..<600 {
            let count = Int.random(in: 1...6, using: &random)
            let text = (0..<count).map { _ in Self.pieces.randomElement(using: &random)! }.joined()
            guard let name = try? FileName(text) else { continue }
            accepted += 1
            for component in text.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
                #expect(!component.isEmpty && !component.elementsEqual([46]) && !component.elementsEqual([46, 46]),
                        "accepted \(text.unicodeScalars.map { $0.value })")
            }
            do {
                try fixture.store.write([1], to: name, in: fixture.namespace, protection: .none)
            } catch let error as ProtectionError where error.code == .invalidName || error.code == .alreadyExists {
                continue // a file where a directory is wanted, or the reverse
            }
            // realpath(3) resolves as the kernel does, on bytes; so does the comparison.
            guard let real = realpath(try layout.path(of: text, uid: fixture.namespace.uid), nil) else {
                Issue.record("\(text.unicodeScalars.map { $0.value }) was written but cannot be resolved")
                continue
            }
            let resolved = String(cString: real)
            free(real)
            #expect(resolved.utf8.starts(with: (files + "/").utf8),
                    "\(text.unicodeScalars.map { $0.value }) resolved to \(resolved)")
        }
        #expect(accepted > 50)
        // Nothing was created beside the files directory and the store's own temporary one.
        let namespaceEntries = try FileManager.default.contentsOfDirectory(atPath: files + "/..")
        #expect(Set(namespaceEntries).isSubset(of: ["files", "tmp"]), "\(namespaceEntries)")
    }
}
