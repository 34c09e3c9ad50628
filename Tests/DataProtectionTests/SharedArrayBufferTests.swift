@testable import DataProtection
import NIOCore
import Testing

/// Buffers that send a caller's bytes from the caller's array.
@Suite("Shared array buffers", .serialized)
struct SharedArrayBufferTests {
    @Test("a buffer reads the array in place, keeps its bytes when the array changes or goes, and lets go when freed")
    func sharesAndLetsGo() throws {
        let before = SharedArrayBuffer.liveBufferCount
        var array = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let original = array.map { $0 }  // storage of its own
        var buffers = [SharedArrayBuffer.buffer(sharing: array[10..<90_010]),
                       SharedArrayBuffer.buffer(sharing: array[10..<90_010])]
        #expect(SharedArrayBuffer.liveBufferCount == before + 2)
        let arrayAddress = array.withUnsafeBytes { $0.baseAddress! } + 10
        for buffer in buffers {
            #expect(buffer.withUnsafeReadableBytes { $0.baseAddress } == UnsafeRawPointer(arrayAddress), "copied")
        }
        // The caller changes its array, then drops it: the buffers still
        // hold the bytes they were given.
        array[20] &+= 1
        array = []
        for buffer in buffers {
            let same = Array(buffer.readableBytesView) == Array(original[10..<90_010])
            #expect(same)
        }
        buffers.removeLast()
        #expect(SharedArrayBuffer.liveBufferCount == before + 1)
        buffers.removeAll()
        #expect(SharedArrayBuffer.liveBufferCount == before)
        #expect(SharedArrayBuffer.buffer(sharing: original[5..<5]).readableBytes == 0)
        #expect(SharedArrayBuffer.liveBufferCount == before)
    }

    @Test("a shared buffer written while another copy holds it, or grown, moves to memory of its own")
    func writesCopy() throws {
        let before = SharedArrayBuffer.liveBufferCount
        let array = [UInt8](repeating: 5, count: 4_096)
        var buffer = SharedArrayBuffer.buffer(sharing: array[...])
        var other = buffer
        other.setInteger(UInt8(9), at: 0)  // copy on write: `buffer` holds the array too
        buffer.writeInteger(UInt8(9))  // `buffer` alone holds it now, but it has no room to grow
        #expect(array.allSatisfy { $0 == 5 })
        #expect(other.getInteger(at: 0, as: UInt8.self) == 9 && buffer.readableBytes == 4_097)
        buffer = ByteBuffer()
        other = ByteBuffer()
        #expect(SharedArrayBuffer.liveBufferCount == before)
    }
}
