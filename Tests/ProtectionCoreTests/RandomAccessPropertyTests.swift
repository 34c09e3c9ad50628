import ProtectionCore
import ProtectionTestSupport
import Testing

/// Random reads, writes, appends and truncations through a handle agree with
/// a plain byte array, around every segment-boundary size and on a file of
/// 64 segments, with offsets spread across it.
@Suite("Random access agrees with an in-memory model")
struct RandomAccessPropertyTests {
    static let segment = 1024
    static let startSizes = [0, 1, segment - 1, segment, segment + 1, 3 * segment + 17, 5 * segment, 64 * segment]

    @Test("random operations from each starting size, with each cipher", arguments: StoreFixture.ciphers, startSizes)
    func randomOperations(cipher: ContentCipher, startSize: Int) throws {
        let seed = UInt64(0xC0FFEE) &+ UInt64(startSize)
        var random = SeededGenerator(seed: seed)
        let fixture = try StoreFixture(segmentSize: Self.segment, cipher: cipher)
        let name = fixture.name("model")
        var model = (0..<startSize).map { _ in UInt8.random(in: 0...255, using: &random) }
        try fixture.store.write(model, to: name, in: fixture.namespace)
        var handle = try fixture.store.open(name, in: fixture.namespace, mode: .existing)
        let interesting = [0, 1, Self.segment - 1, Self.segment, Self.segment + 1, 2 * Self.segment, 4 * Self.segment - 3,
                           startSize / 2, startSize - Self.segment, startSize - 1, startSize]

        func randomOffset() -> Int {
            Bool.random(using: &random)
                ? interesting.randomElement(using: &random)! + Int.random(in: -2...2, using: &random)
                : Int.random(in: 0...(model.count + Self.segment), using: &random)
        }

        for step in 0..<150 {
            let context: Comment = "seed \(seed) step \(step)"
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3:
                let offset = max(0, randomOffset())
                let count = Int.random(in: 0...(2 * Self.segment + 5), using: &random)
                let expected = offset < model.count ? Array(model[offset..<min(model.count, offset + count)]) : []
                #expect(try handle.read(offset: offset, count: count) == expected, context)
            case 3..<6:
                let offset = max(0, randomOffset())
                let bytes = (0..<Int.random(in: 1...(2 * Self.segment + 3), using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
                try handle.write(bytes, at: offset)
                if offset > model.count { model += [UInt8](repeating: 0, count: offset - model.count) }
                let overlap = min(bytes.count, model.count - offset)
                model.replaceSubrange(offset..<(offset + overlap), with: bytes[..<overlap])
                model += bytes[overlap...]
            case 6:
                let bytes = (0..<Int.random(in: 1...700, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                #expect(try handle.append(bytes) == model.count + bytes.count, context)
                model += bytes
            case 7:
                let size = max(0, randomOffset())
                try handle.truncate(to: size)
                if size < model.count { model.removeLast(model.count - size) } else {
                    model += [UInt8](repeating: 0, count: size - model.count)
                }
            case 8:
                // Reopen: everything must have reached the file.
                handle.close()
                handle = try fixture.store.open(name, in: fixture.namespace, mode: .existing)
            default:
                #expect(try handle.size() == model.count, context)
            }
        }
        handle.close()
        #expect(try fixture.store.read(name, in: fixture.namespace) == model)
        #expect(try fixture.store.attributes(of: name, in: fixture.namespace).size == model.count)
    }

    @Test("whole-file writes of boundary sizes read back exactly", arguments: startSizes + [64 * 1024 + 1])
    func wholeFileRoundTrip(size: Int) throws {
        var random = SeededGenerator(seed: UInt64(size))
        let fixture = try StoreFixture(segmentSize: Self.segment)
        let content = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        for protection in ProtectionClass.allCases {
            let name = fixture.name("dir/\(protection)")
            try fixture.store.write(content, to: name, in: fixture.namespace, protection: protection, durable: false)
            #expect(try fixture.store.read(name, in: fixture.namespace) == content)
            #expect(try fixture.store.attributes(of: name, in: fixture.namespace).size == size)
        }
    }
}
