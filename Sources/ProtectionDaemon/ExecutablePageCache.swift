internal import CFileSystemType
internal import Glibc

/// Keeps an idle daemon's executable mapped in small pieces. A file read
/// through with `read` (a backup, a checksum, `cp`, an install) is cached in
/// large folios, up to 1 MiB each, and Linux 6.18 maps a large folio whole
/// on a fault, so every function protd runs would keep the 256 KiB-1 MiB of
/// code around it resident: idle RSS 16.9-18.2 MiB instead of 14.0-15.0,
/// 11.3 MiB of code instead of 7.2 (docs/DESIGN.md, Memory). Pages that
/// faults bring in arrive in small folios instead, mapped 64 KiB at a time.
///
/// So, first thing at start, protd maps its executable's code once more,
/// faults in a page at each of seven places it has not used yet, and looks
/// (in its page table) whether the kernel mapped two windows or more each
/// time, at two places or more. If so, protd unmaps the file's pages
/// from its read-only mappings (code, constants; private copies stay) and
/// asks the kernel to drop the executable's cached pages. Pages mapped
/// meanwhile stay, among them the few folios around the code doing this;
/// the rest come back from disk, in small folios, as protd runs. That start
/// reads its code from disk, like a start after a reboot; later ones find
/// small folios.
public enum ExecutablePageCache {
    /// What `dropIfMappedInLargeFolios` found and did.
    public enum Outcome: Equatable, Sendable {
        /// The executable was cached in large folios: its pages were
        /// unmapped and the kernel asked to drop them.
        case dropped
        /// The code faults in small folios: nothing to do.
        case smallFolios
        /// The check could not be made, or stopped (an old kernel, a
        /// system-call filter), or would be in vain (an executable on
        /// tmpfs); nothing was dropped. Says why.
        case unavailable(String)
    }

    /// Where to fault pages in: this many eighths through the code, or the
    /// first fault-around window after that in which the code has mapped
    /// nothing yet. Folios it maps stay cached whatever it asks, so probing
    /// near them would find them large at every start, and drop in vain.
    static let probeEighths = [1, 2, 3, 4, 5, 6, 7]
    /// The kernel's fault-around window (`fault_around_bytes`, 64 KiB unless
    /// changed in debugfs): a fault maps the cached pages within it. Where
    /// it was set to 128 KiB or more, small folios look large here, and
    /// every start drops the executable's pages in vain (and reads its code
    /// from disk again); nothing worse.
    static let faultAroundBytes = 64 * 1024
    /// `faultAroundBytes` in pages.
    static var windowPages: Int { faultAroundBytes / ProcessMemoryMap.pageSize }
    /// The largest folio a file is cached in (a huge page, 2 MiB on x86-64).
    static let largestFolioBytes = 2 * 1024 * 1024

    /// Checks the executable and drops its cached pages if its code is in
    /// large folios. Call first in `main`: before most code is mapped, and
    /// before the process makes itself not dumpable (which closes
    /// /proc/self/pagemap to it). Never fails: protd runs either way.
    public static func dropIfMappedInLargeFolios() -> Outcome {
        do throws(ProcessMemoryMap.Failure) {
            let executable = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
            guard executable >= 0 else { throw ProcessMemoryMap.Failure(call: "open /proc/self/exe", code: errno) }
            defer { close(executable) }
            if let kept = try pagesStayCached(executable) { return .unavailable(kept) }
            let memory = try ProcessMemoryMap()
            let mappings = try ProcessMemoryMap.mappings(of: executable)
            guard let code = mappings.first(where: { $0.permissions.hasPrefix("r-x") }) else {
                return .unavailable("no mapping of the executable's code in /proc/self/maps")
            }
            let probes = try probePages(in: code.region, memory: memory)
            guard try faultsInLargeFolios(executable, offset: code.fileOffset, length: code.region.count,
                                          placedLike: code.region.baseAddress!, probing: probes, memory: memory)
            else { return .smallFolios }
            // Only read-only mappings: a writable page could be written (copied) between reading the
            // page table and unmapping it, and the write would be lost. (Read-only ones are written
            // only by a debugger or a uprobe; such a write would be lost too, at this one moment.)
            for mapping in mappings where !mapping.permissions.contains("w") {
                try unmapFilePages(of: mapping.region, memory: memory)
            }
            let result = posix_fadvise(executable, 0, 0, Int32(POSIX_FADV_DONTNEED))
            guard result == 0 else { throw ProcessMemoryMap.Failure(call: "posix_fadvise", code: result) }
            return .dropped
        } catch {
            return .unavailable(error.description)
        }
    }

    /// Why `file`'s cached pages cannot be dropped, or nil when they can:
    /// on tmpfs and ramfs the page cache is the file itself, and
    /// `POSIX_FADV_DONTNEED` does nothing there (and still succeeds).
    static func pagesStayCached(_ file: Int32) throws(ProcessMemoryMap.Failure) -> String? {
        var type: UInt = 0
        guard protd_file_system_type(file, &type) == 0 else { throw ProcessMemoryMap.Failure(call: "fstatfs", code: errno) }
        switch type {
        case Self.tmpfsMagic: return "the executable is on tmpfs, whose pages cannot be dropped"
        case Self.ramfsMagic: return "the executable is on ramfs, whose pages cannot be dropped"
        default: return nil
        }
    }

    /// `statfs` file-system types (linux/magic.h) whose files live in the page cache.
    static let tmpfsMagic: UInt = 0x0102_1994
    static let ramfsMagic: UInt = 0x8584_58F6

    /// The pages of `code` to fault in (see `probeEighths`).
    static func probePages(in code: UnsafeRawBufferPointer, memory: borrowing ProcessMemoryMap)
        throws(ProcessMemoryMap.Failure) -> [Int] {
        let pages = try memory.pages(from: code.baseAddress!, count: code.count / ProcessMemoryMap.pageSize)
        let basePage = Int(bitPattern: code.baseAddress!) / ProcessMemoryMap.pageSize
        return probeEighths.compactMap { eighth in
            // Windows are aligned in addresses; the first may begin before the eighth does.
            var window = (basePage + pages.count * eighth / 8) / windowPages * windowPages - basePage
            while window < pages.count * (eighth + 1) / 8 {
                let inWindow = max(0, window)..<min(pages.count, window + windowPages)
                if inWindow.allSatisfy({ !pages[$0].present }) { return inWindow.lowerBound }
                window += windowPages
            }
            return nil
        }
    }

    /// Whether `length` bytes of `file` from `offset` (page-aligned) fault
    /// in large folios where they are mapped at `placement`: maps them
    /// afresh, so nothing else touches the mapping, at the same address
    /// modulo `largestFolioBytes` (so folios meet fault-around windows as
    /// they do there), faults in each page of `probes` (indices) alone, and
    /// looks whether the kernel mapped two windows of pages or more for two
    /// of them or more.
    static func faultsInLargeFolios(_ file: Int32, offset: Int, length: Int, placedLike placement: UnsafeRawPointer,
                                    probing probes: [Int], memory: borrowing ProcessMemoryMap)
        throws(ProcessMemoryMap.Failure) -> Bool {
        let pageSize = ProcessMemoryMap.pageSize
        guard length >= pageSize else { return false }
        let span = length + largestFolioBytes
        guard let reserved = mmap(nil, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
              reserved != MAP_FAILED else {
            throw ProcessMemoryMap.Failure(call: "mmap", code: errno)
        }
        defer { munmap(reserved, span) }
        let shift = (Int(bitPattern: placement) - Int(bitPattern: reserved)) & (largestFolioBytes - 1)
        guard let mapped = mmap(reserved + shift, length, PROT_READ, MAP_PRIVATE | MAP_FIXED, file, off_t(offset)),
              mapped != MAP_FAILED else {
            throw ProcessMemoryMap.Failure(call: "mmap", code: errno)
        }
        let pageCount = length / pageSize
        // A fault maps the folios meeting its window, so no page further from it than a window
        // and the largest folio.
        let reach = (faultAroundBytes + largestFolioBytes) / pageSize
        var large = 0
        for probe in probes where probe < pageCount {
            guard madvise(mapped + probe * pageSize, pageSize, MADV_POPULATE_READ) == 0 else {
                throw ProcessMemoryMap.Failure(call: "madvise MADV_POPULATE_READ", code: errno)
            }
            let around = max(0, probe - reach)..<min(pageCount, probe + reach)
            let first = mapped + around.lowerBound * pageSize
            // Small folios fill the probe's window and reach at most a few pages past it, where one
            // straddles the window's edge; large ones (64 KiB ones across the edge, too) map more.
            let mappedPages = try memory.pages(from: first, count: around.count).count { $0.present }
            if mappedPages >= 2 * windowPages { large += 1 }
            // Unmapped again, so the next probe starts from nothing mapped.
            try clearPageTable(first, length: around.count * pageSize)
        }
        // A whole-file read leaves large folios everywhere; a few stay from the last drop, around
        // the code that ran it, and must not make every start drop again: one probe never decides.
        // Nor must a read-through go unnoticed where most probes happen to meet folios of one
        // window: with four places and half of them needed, 2 read-through starts of 48 did not drop.
        return large >= 2
    }

    /// Clears the page-table entries of the file's pages in `region`, run
    /// by run; later accesses map them again. Private copies (pages written
    /// to, or never from the file) are left alone.
    private static func unmapFilePages(of region: UnsafeRawBufferPointer, memory: borrowing ProcessMemoryMap)
        throws(ProcessMemoryMap.Failure) {
        let pageSize = ProcessMemoryMap.pageSize
        let pages = try memory.pages(from: region.baseAddress!, count: region.count / pageSize)
        var index = 0
        while index < pages.count {
            guard pages[index].present && pages[index].fromFile else { index += 1; continue }
            let runStart = index
            while index < pages.count && pages[index].present && pages[index].fromFile { index += 1 }
            try clearPageTable(UnsafeMutableRawPointer(mutating: region.baseAddress! + runStart * pageSize),
                               length: (index - runStart) * pageSize)
        }
    }

    /// Clears the page-table entries of `length` bytes from `start`; later
    /// accesses map the file's pages again (and lose private copies).
    private static func clearPageTable(_ start: UnsafeMutableRawPointer, length: Int) throws(ProcessMemoryMap.Failure) {
        guard madvise(start, length, MADV_DONTNEED) == 0 else {
            throw ProcessMemoryMap.Failure(call: "madvise MADV_DONTNEED", code: errno)
        }
    }
}
