internal import Glibc
internal import ProtectionCore

/// What Linux shows a process about its own mappings: the regions in
/// `/proc/self/maps` and, per page, whether it is mapped and whether it is
/// a page of the file or a private copy (`/proc/self/pagemap`). Open it
/// before the process makes itself not dumpable: the kernel then hands
/// /proc/self/pagemap (mode 0400) to root.
struct ProcessMemoryMap: ~Copyable {
    /// A system call that failed, with errno's text.
    struct Failure: Error, Equatable, CustomStringConvertible {
        let description: String

        init(call: String, code: Int32) { description = "\(call): \(String(cString: strerror(code)))" }
        init(_ error: any Error) { description = "\(error)" }
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

    /// This process's mappings of the open `file`, in address order. They
    /// are matched by device and inode, not by path: a path in
    /// /proc/self/maps may hold spaces or escapes.
    static func mappings(of file: Int32) throws(Failure) -> [FileMapping] {
        var status = stat()
        guard fstat(file, &status) == 0 else { throw Failure(call: "fstat", code: errno) }
        // glibc's dev_t layout, as /proc/self/maps prints it: "major:minor" in hex.
        let device = UInt64(status.st_dev)
        let major = (device >> 8) & 0xfff | (device >> 32) & 0xffff_f000
        let minor = device & 0xff | (device >> 12) & 0xffff_ff00
        let deviceField = String(major, radix: 16, uppercase: false).leftPadded(to: 2) + ":"
            + String(minor, radix: 16, uppercase: false).leftPadded(to: 2)
        let inodeField = String(status.st_ino)
        return try contents(of: "/proc/self/maps").split(separator: UInt8(ascii: "\n")).compactMap { line in
            // start-end permissions offset device inode path
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 5).map { String(decoding: $0, as: UTF8.self) }
            guard fields.count >= 5, fields[3] == deviceField, fields[4] == inodeField,
                  let offset = Int(fields[2], radix: 16) else { return nil }
            let bounds = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
            guard bounds.count == 2, bounds[0] < bounds[1], let start = UnsafeRawPointer(bitPattern: bounds[0]) else {
                return nil
            }
            return FileMapping(region: UnsafeRawBufferPointer(start: start, count: Int(bounds[1] - bounds[0])),
                               permissions: fields[1], fileOffset: offset)
        }
    }

    /// A /proc file whole.
    private static func contents(of path: String) throws(Failure) -> [UInt8] {
        do {
            return try Posix.contents(of: path, atMost: 16 << 20)
        } catch {
            throw Failure(error)
        }
    }
}

private extension String {
    /// Zeros in front up to `width` characters, as /proc/self/maps prints device numbers.
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
