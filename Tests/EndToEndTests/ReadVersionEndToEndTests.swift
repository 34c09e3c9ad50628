import DataProtection
import Foundation
import ProtectionTestSupport
import Synchronization
import Testing

/// A whole-file read sees one version of the file: the inode open at its
/// start, and (where a handle writes that inode in place) either one
/// version or `fileChanged`, never a mix at a chunk boundary.
@Suite("One version per read", .serialized)
struct ReadVersionEndToEndTests {
    /// Four read chunks (512 KiB each under the default frame limit).
    static let size = 2 << 20

    @Test("whole-file reads during repeated whole-file writes each return exactly one written version")
    func readsDuringWholeFileWrites() async throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let writer = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let reader = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let file = "versions"
        try await writer.file(file).write([UInt8](repeating: 0, count: Self.size), protection: .none)
        let done = Atomic<Bool>(false)
        let writing = Task {
            defer { done.store(true, ordering: .releasing) }
            for version in 1...60 {
                try await writer.file(file).write([UInt8](repeating: UInt8(version), count: Self.size), protection: .none)
            }
        }
        var reads = 0
        while !done.load(ordering: .acquiring) || reads < 20 {
            let content = try await reader.file(file).read()
            #expect(content.count == Self.size)
            #expect(Set(content).count == 1, "read \(reads) mixes versions \(Set(content).sorted())")
            reads += 1
        }
        try await writing.value
        await writer.close()
        await reader.close()
    }

    @Test("whole-file reads while a handle rewrites a region across a chunk boundary return one version or fileChanged")
    func readsDuringHandleWrites() async throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let writer = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let reader = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        let file = "in-place"
        try await writer.file(file).write([UInt8](repeating: 0, count: Self.size), protection: .none)
        let handle = try await writer.file(file).open(.existing)
        // One handleWrite (so one version) straddling the first two read chunks.
        let region = (512 << 10) - (32 << 10)..<(512 << 10) + (32 << 10)
        let stop = Atomic<Bool>(false)
        let writing = Task {
            var version: UInt8 = 0
            while !stop.load(ordering: .relaxed) {
                version &+= 1
                try await handle.write([UInt8](repeating: version, count: region.count), at: UInt64(region.lowerBound))
            }
        }
        var whole = 0
        var changed = 0
        for _ in 0..<300 {
            let result: Result<[UInt8], DataProtectionError>
            do { result = .success(try await reader.file(file).read()) } catch { result = .failure(error) }
            switch result {
            case .success(let content):
                let values = Set(content[region])
                #expect(values.count == 1, "a read mixes versions \(values.sorted()) at the chunk boundary")
                whole += 1
            case .failure(.fileChanged(let message)):
                #expect(message.contains("changed through a handle"))
                changed += 1
            case .failure(let error):
                throw error
            }
        }
        stop.store(true, ordering: .relaxed)
        try await writing.value
        await writer.close()
        await reader.close()
        #expect(whole > 0, "some reads completed (\(whole) whole, \(changed) fileChanged)")
    }
}
