internal import Glibc

/// What Linux shows a process about its own mappings: the regions in
/// `/proc/self/maps` and, per page, whether it is mapped and whether it is
/// a page of the file or a private copy (`/proc/self/pagemap`). Open it
/// before the process makes itself not dumpable: the kernel then hands
/// these files to root.
struct ProcessMemoryMap: ~Copyable {
    /// A system call that failed, and its errno.
    struct Failure: Error, Equatable, CustomStringConvertible {
        let call: String
        let code: Int32
        var description: String { "\(call): \(String(cString: strerror(code)))" }
    }

    /// One page's entry.
    struct Page: Equatable {
        /// Mapped into the page table.
        let present: Bool
        /// A page of the mapped file (or of shared memory), not a private copy.
        let fromFile: Bool
    }

    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    private let pagemap: Int32

    init() throws(Failure) {
        pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)
        guard pagemap >= 0 else { throw Failure(call: "open /proc/self/pagemap", code: errno) }
    }

    deinit { close(pagemap) }

    /// The entries of the pages from `start` (page-aligned), `count` of them.
    func pages(from start: UnsafeRawPointer, count: Int) throws(Failure) -> [Page] {
        var entries = [UInt64](repeating: 0, count: count)
        let offset = off_t(UInt(bitPattern: start) / UInt(Self.pageSize) * 8)
        let wanted = count * 8
        let read = entries.withUnsafeMutableBytes { pread(pagemap, $0.baseAddress, wanted, offset) }
        guard read == wanted else { throw Failure(call: "pread /proc/self/pagemap", code: read < 0 ? errno : EIO) }
        return entries.map { Page(present: $0 >> 63 & 1 == 1, fromFile: $0 >> 61 & 1 == 1) }
    }

    /// One mapping of a file.
    struct FileMapping {
        /// Where it is mapped.
        let region: UnsafeRawBufferPointer
        /// `r-xp`, `rw-p` and so on.
        let permissions: String
        /// Where in the file it starts.
        let fileOffset: Int
    }

    /// The mappings of the file `/proc/self/exe` names, in address order.
    static func executableMappings() throws(Failure) -> [FileMapping] {
        let executable = try link("/proc/self/exe")
        return try contents(of: "/proc/self/maps").split(separator: UInt8(ascii: "\n")).compactMap { line in
            // start-end permissions offset device inode path
            let fields = line.split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
            guard fields.count >= 6, fields[5...].joined(separator: " ") == executable,
                  let offset = Int(fields[2], radix: 16) else { return nil }
            let bounds = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
            guard bounds.count == 2, bounds[0] < bounds[1], let start = UnsafeRawPointer(bitPattern: bounds[0]) else {
                return nil
            }
            return FileMapping(region: UnsafeRawBufferPointer(start: start, count: Int(bounds[1] - bounds[0])),
                               permissions: fields[1], fileOffset: offset)
        }
    }

    private static func link(_ path: String) throws(Failure) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length >= 0 else { throw Failure(call: "readlink \(path)", code: errno) }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func contents(of path: String) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(call: "open \(path)", code: errno) }
        defer { close(fd) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count >= 0 else { throw Failure(call: "read \(path)", code: errno) }
            if count == 0 { return contents }
            contents += chunk[..<count]
        }
    }
}
