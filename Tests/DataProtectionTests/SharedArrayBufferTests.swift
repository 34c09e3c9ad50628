@testable import DataProtection
import NIOCore
import Testing

/// Buffers that send a caller's bytes from the caller's array.
@Suite("Shared array buffers")
struct SharedArrayBufferTests {
    @Test("a buffer reads the array in place, keeps its bytes when the array changes or goes, and lets go when freed")
    func sharesAndLetsGo() throws {
        var array = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let original = array.map { $0 }  // storage of its own
        let start = array[10...]
        let later = array[50_000...]
        var buffers = [SharedArrayBuffer.buffer(sharing: array[10..<90_010]),
                       SharedArrayBuffer.buffer(sharing: array[10..<90_010]),
                       SharedArrayBuffer.buffer(sharing: array[50_000..<100_000])]
        #expect(SharedArrayBuffer.liveBuffers(startingAt: start) == 2)
        #expect(SharedArrayBuffer.liveBuffers(startingAt: later) == 1)
        let arrayAddress = array.withUnsafeBytes { $0.baseAddress! }
        for (buffer, offset) in zip(buffers, [10, 10, 50_000]) {
            #expect(buffer.withUnsafeReadableBytes { $0.baseAddress } == UnsafeRawPointer(arrayAddress + offset), "copied")
        }
        // The caller changes its array, then drops it: the buffers still
        // hold the bytes they were given.
        array[20] &+= 1
        array[60_000] &+= 1
        array = []
        for (buffer, range) in zip(buffers, [10..<90_010, 10..<90_010, 50_000..<100_000]) {
            let same = Array(buffer.readableBytesView) == Array(original[range])
            #expect(same, "bytes \(range) changed")
        }
        buffers.removeLast()
        #expect(SharedArrayBuffer.liveBuffers(startingAt: later) == 0)
        #expect(SharedArrayBuffer.liveBuffers(startingAt: start) == 2)
        buffers.removeFirst()
        #expect(SharedArrayBuffer.liveBuffers(startingAt: start) == 1)
        buffers.removeAll()
        #expect(SharedArrayBuffer.liveBuffers(startingAt: start) == 0)
        #expect(SharedArrayBuffer.buffer(sharing: original[5..<5]).readableBytes == 0)
        #expect(SharedArrayBuffer.liveBuffers(startingAt: original[5...]) == 0)
    }

    @Test("a shared buffer written while another copy holds it, or grown, moves to memory of its own")
    func writesCopy() throws {
        let array = [UInt8](repeating: 5, count: 4_096)
        var buffer = SharedArrayBuffer.buffer(sharing: array[...])
        var other = buffer
        other.setInteger(UInt8(9), at: 0)  // copy on write: `buffer` holds the array too
        buffer.writeInteger(UInt8(9))  // `buffer` alone holds it now, but it has no room to grow
        #expect(array.allSatisfy { $0 == 5 })
        #expect(other.getInteger(at: 0, as: UInt8.self) == 9 && buffer.readableBytes == 4_097)
        #expect(SharedArrayBuffer.liveBuffers(startingAt: array[...]) == 0)
        buffer = ByteBuffer()
        other = ByteBuffer()
    }
}
