import Foundation
@testable import ProtectionDaemon
import ProtectionTestSupport
import Testing

/// The start-up check that finds an executable cached in large folios (as
/// a whole-file `read` leaves it) and drops it, and the page-table reader
/// under it.
@Suite("Executable page cache", .serialized)
struct ExecutablePageCacheTests {
    static let pageSize = ProcessMemoryMap.pageSize

    @Test("the page table shows a page mapped once touched, and whether it is the file's or a private copy")
    func pageTable() throws {
        let memory = try ProcessMemoryMap()
        let length = 4 * Self.pageSize
        let anonymous = try #require(mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        defer { munmap(anonymous, length) }
        #expect(try memory.pages(from: anonymous, count: 4).allSatisfy { !$0.present })
        anonymous.storeBytes(of: 1, toByteOffset: 2 * Self.pageSize, as: UInt8.self)
        #expect(try memory.pages(from: anonymous, count: 4)
            == [.absent, .absent, ProcessMemoryMap.Page(present: true, fromFile: false), .absent])

        let file = try TestFile(bytes: 3 * Self.pageSize)
        defer { file.remove() }
        let mapped = try #require(mmap(nil, 3 * Self.pageSize, PROT_READ, MAP_PRIVATE, file.descriptor, 0))
        defer { munmap(mapped, 3 * Self.pageSize) }
        #expect(madvise(mapped, Self.pageSize, MADV_POPULATE_READ) == 0)
        #expect(try memory.pages(from: mapped, count: 1) == [ProcessMemoryMap.Page(present: true, fromFile: true)])
    }

    @Test("a file's mappings are found by device and inode, whatever its name; the executable's code among its own")
    func mappingsOfAFile() throws {
        let executable = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
        #expect(executable >= 0)
        defer { close(executable) }
        #expect(try ProcessMemoryMap.mappings(of: executable).contains { $0.permissions.hasPrefix("r-x") })

        let file = try TestFile(bytes: 4 * Self.pageSize, name: "a  name with spaces\nand a newline")
        defer { file.remove() }
        #expect(try ProcessMemoryMap.mappings(of: file.descriptor).isEmpty)
        let mapped = try #require(mmap(nil, 2 * Self.pageSize, PROT_READ, MAP_PRIVATE, file.descriptor,
                                       off_t(2 * Self.pageSize)))
        defer { munmap(mapped, 2 * Self.pageSize) }
        let mappings = try ProcessMemoryMap.mappings(of: file.descriptor)
        #expect(mappings.count == 1)
        #expect(mappings.first?.region.baseAddress == UnsafeRawPointer(mapped))
        #expect(mappings.first?.region.count == 2 * Self.pageSize)
        #expect(mappings.first?.fileOffset == 2 * Self.pageSize)
        #expect(mappings.first?.permissions == "r--p")
    }

    @Test("a file faulted in through a mapping comes in small folios, wherever they meet the fault-around windows")
    func smallFoliosAfterFaults() throws {
        let file = try TestFile(bytes: 8 << 20)
        defer { file.remove() }
        try PageCache.drop(file.path)
        for pages in 0..<4 {
            let placement = try #require(UnsafeRawPointer(bitPattern: ExecutablePageCache.largestFolioBytes + pages * Self.pageSize))
            #expect(try ExecutablePageCache.faultsInLargeFolios(file.descriptor, offset: 0, length: 8 << 20,
                                                                placedLike: placement, probing: Self.eighths(of: 8 << 20),
                                                                memory: ProcessMemoryMap()) == false)
        }
    }

    @Test("a file read through with read() is found in large folios where the kernel maps them whole",
          .enabled(if: getuid() == 0, "which folios the kernel cached is known only to root (/proc/kpageflags)"),
          .enabled(if: kernelIsAtLeast(6, 18), "mapping a large folio whole on a fault came with Linux 6.18"))
    func largeFoliosAfterRead() throws {
        // Readahead grows its folios as a read goes on: 1 MiB ones come after some 20 MiB.
        let length = 32 << 20
        let file = try TestFile(bytes: length)
        defer { file.remove() }
        try PageCache.drop(file.path)
        try PageCache.readThrough(file.path)
        // Placed as the file is laid out, so no folio straddles a fault-around window.
        let placement = try #require(UnsafeRawPointer(bitPattern: ExecutablePageCache.largestFolioBytes))
        // The probes at the usual eighths hit 64 and 256-page folios at the last ones; moved to
        // the first three eighths and the last, only one of them does, which is not enough.
        let pages = length / Self.pageSize
        for probes in [Self.eighths(of: length), [0, 1, 2, 7].map { pages * $0 / 8 }] {
            let found = try ExecutablePageCache.faultsInLargeFolios(file.descriptor, offset: 0, length: length,
                                                                    placedLike: placement, probing: probes,
                                                                    memory: ProcessMemoryMap())
            let folios = try probes.map { try #require(file.folioPages(atPage: $0)) }
            // Found when two probes or more hit a folio larger than a window.
            let large = folios.count { $0 > ExecutablePageCache.windowPages }
            #expect(found == (large >= 2), "folios of \(folios) pages at pages \(probes)")
        }
    }

    @Test("this test process's own executable can be checked, unless it is on tmpfs")
    func ownExecutable() throws {
        let executable = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
        try #require(executable >= 0)
        defer { close(executable) }
        let kept = try ExecutablePageCache.pagesStayCached(executable)
        let outcome = ExecutablePageCache.dropIfMappedInLargeFolios()
        if let kept {
            #expect(outcome == .unavailable(kept))
        } else {
            #expect(outcome == .dropped || outcome == .smallFolios)
        }
    }

    @Test("a file on tmpfs is known to keep its pages in memory",
          .enabled(if: MountTable.type(of: "/dev/shm") == "tmpfs", "/dev/shm is not a tmpfs here"))
    func tmpfsKeepsItsPages() throws {
        let directory = try TemporaryDirectory("page-cache", in: "/dev/shm")
        defer { directory.remove() }
        let path = directory.appending("file")
        #expect(FileManager.default.createFile(atPath: path, contents: Data([1])))
        let onTmpfs = open(path, O_RDONLY | O_CLOEXEC)
        try #require(onTmpfs >= 0)
        defer { close(onTmpfs) }
        #expect(try ExecutablePageCache.pagesStayCached(onTmpfs) == "the executable is on tmpfs, whose pages cannot be dropped")
    }

    @Test("mount points in /proc/mounts are read with their octal escapes decoded")
    func mountTableEscapes() {
        #expect(MountTable.unescaped("/mnt/a\\040b\\011c\\012d\\134e") == "/mnt/a b\tc\nd\\e")
        #expect(MountTable.unescaped("/plain\\04") == "/plain\\04")
    }

    @Test("a file on a disk file system is not",
          .enabled(if: !MountTable.isInMemory(FileManager.default.temporaryDirectory.path), "the temporary directory is in memory here"))
    func diskFileDropsItsPages() throws {
        let file = try TestFile(bytes: Self.pageSize)
        defer { file.remove() }
        #expect(try ExecutablePageCache.pagesStayCached(file.descriptor) == nil)
    }

    @Test("probes go to fault-around windows in which nothing is mapped yet")
    func probesSkipMappedWindows() throws {
        let memory = try ProcessMemoryMap()
        let window = ExecutablePageCache.faultAroundBytes
        let length = 256 * Self.pageSize
        let reserved = try #require(mmap(nil, length + window, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        defer { munmap(reserved, length + window) }
        // Aligned as windows are, so that window k holds pages 16k..<16k+16.
        let region = reserved + (window - Int(bitPattern: reserved) % window) % window
        // Page 34 is in use: the first eighth (pages 32..<64) probes its second window instead.
        region.storeBytes(of: 1, toByteOffset: 34 * Self.pageSize, as: UInt8.self)
        let probes = try ExecutablePageCache.probePages(in: UnsafeRawBufferPointer(start: region, count: length),
                                                        memory: memory)
        #expect(window / Self.pageSize == 16)
        #expect(probes == [48, 64, 96, 128, 160, 192, 224])
    }

    /// The pages `probeEighths` names in a mapping of `length` bytes with nothing mapped.
    private static func eighths(of length: Int) -> [Int] {
        ExecutablePageCache.probeEighths.map { length / pageSize * $0 / 8 }
    }

    static func kernelIsAtLeast(_ major: Int, _ minor: Int) -> Bool {
        let release = ProcessInfo.processInfo.operatingSystemVersion
        return (release.majorVersion, release.minorVersion) >= (major, minor)
    }
}

private extension ProcessMemoryMap.Page {
    static let absent = ProcessMemoryMap.Page(present: false, fromFile: false)
}

/// A file of `bytes` bytes in a fresh temporary directory, open for reading, written back to disk.
private struct TestFile {
    let directory: TemporaryDirectory
    let path: String
    let descriptor: Int32

    init(bytes: Int, name: String = "file") throws {
        directory = try TemporaryDirectory("page-cache")
        path = directory.appending(name)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x5A, count: bytes)))
        descriptor = open(path, O_RDONLY)
        // Written back first: the kernel does not drop pages still dirty.
        #expect(descriptor >= 0 && fsync(descriptor) == 0)
    }

    /// Pages in the cached folio holding page `index` of the file, from
    /// /proc/kpageflags; nil where that is not readable (not root).
    func folioPages(atPage index: Int) -> Int? {
        let pageSize = ProcessMemoryMap.pageSize
        guard let mapped = mmap(nil, (index + 1) * pageSize, PROT_READ, MAP_PRIVATE, descriptor, 0),
              mapped != MAP_FAILED else { return nil }
        defer { munmap(mapped, (index + 1) * pageSize) }
        let page = mapped + index * pageSize
        guard madvise(page, pageSize, MADV_POPULATE_READ) == 0,
              let entry = Self.entry(in: "/proc/self/pagemap", at: Int(bitPattern: page) / pageSize) else { return nil }
        let frame = Int(entry & (1 << 55 - 1))
        let head = UInt64(1) << 15, tail = UInt64(1) << 16
        guard frame != 0, let flags = Self.entry(in: "/proc/kpageflags", at: frame) else { return nil }
        guard flags & (head | tail) != 0 else { return 1 }
        var first = frame
        while let flags = Self.entry(in: "/proc/kpageflags", at: first), flags & tail != 0 { first -= 1 }
        var count = 1
        while let flags = Self.entry(in: "/proc/kpageflags", at: first + count), flags & tail != 0 { count += 1 }
        return count
    }

    func remove() {
        close(descriptor)
        directory.remove()
    }

    private static func entry(in path: String, at index: Int) -> UInt64? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var value: UInt64 = 0
        return pread(fd, &value, 8, off_t(index * 8)) == 8 ? value : nil
    }
}
