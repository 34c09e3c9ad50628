import ArgumentParser
import CFscrypt
import Foundation
import Glibc
import ProtectionTestSupport

/// protd-bench-fscrypt: kernel fscrypt's side of protd-bench's large-file
/// comparison, in a process of its own (started by protd-bench, as root).
///
/// It first moves into a mount namespace of its own, so the ext4 it
/// loop-mounts goes away with it however it ends; the image file is
/// unlinked as soon as it is mounted. In that ext4, for each repetition, it
/// times a write of the file in 1 MiB pieces up to fsync (fscrypt encrypts
/// when the pages are written back) and a read of it once its cached pages
/// are dropped (fscrypt decrypts as it reads), in a directory with an
/// fscrypt v2 policy and in a plain directory beside it.
///
/// Output, one line each, written at once: `unavailable <reason>`, or
/// `<encrypted|plain> <write|read> <MiB/s>` per measurement. If protd-bench
/// is gone, writing the next line ends it.
@main
struct FscryptHelper: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protd-bench-fscrypt",
        abstract: "Kernel fscrypt for protd-bench's comparison (started by it as root, not by hand).")

    @Option(help: "Where the ext4 image goes (it is unlinked once mounted).")
    var dir: String

    @Option(name: .customLong("size-mib"), help: "The file size, in MiB.")
    var sizeMiB: Int

    @Option(help: "Times each write and read is measured.")
    var repetitions: Int

    func validate() throws {
        guard sizeMiB >= 1, repetitions >= 1 else { throw ValidationError("--size-mib and --repetitions must be at least 1") }
    }

    func run() throws {
        do {
            let volume = try LoopVolume(directory: dir, sizeMiB: sizeMiB)
            let encrypted = try volume.encryptedDirectory()
            let plain = volume.mountPoint + "/plain"
            guard mkdir(plain, 0o700) == 0 else { throw Unavailable("mkdir \(plain)", errno: errno) }
            let piece = [UInt8](repeating: 0x5A, count: 1 << 20)
            for _ in 0..<repetitions {
                for (name, directory) in [("encrypted", encrypted), ("plain", plain)] {
                    let path = directory + "/large"
                    let write = try Self.timedWrite(path, piece: piece, count: sizeMiB)
                    Self.emit("\(name) write \(write)")
                    let read = try Self.timedColdRead(path, pieceSize: piece.count)
                    Self.emit("\(name) read \(read)")
                    unlink(path)
                }
            }
        } catch let unavailable as Unavailable {
            Self.emit("unavailable \(unavailable.description)")
        }
    }

    /// MiB/s of writing `count` pieces to a new file at `path`, fsync included.
    private static func timedWrite(_ path: String, piece: [UInt8], count: Int) throws -> Double {
        let start = ContinuousClock.now
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw Unavailable("open \(path)", errno: errno) }
        defer { close(fd) }
        for _ in 0..<count {
            let written = piece.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard written >= 0 else { throw Unavailable("write \(path)", errno: errno) }
            guard written == piece.count else { throw Unavailable("write \(path): \(written) of \(piece.count) bytes written") }
        }
        guard fsync(fd) == 0 else { throw Unavailable("fsync \(path)", errno: errno) }
        return Double(count) / seconds(since: start)
    }

    /// MiB/s of reading `path` whole after dropping its cached pages, so
    /// the kernel reads (and fscrypt decrypts) it from the loop device.
    private static func timedColdRead(_ path: String, pieceSize: Int) throws -> Double {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw Unavailable("open \(path)", errno: errno) }
        defer { close(fd) }
        // posix_fadvise returns its error rather than setting errno.
        let advised = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        guard advised == 0 else { throw Unavailable("posix_fadvise \(path)", errno: advised) }
        var buffer = [UInt8](repeating: 0, count: pieceSize)
        var total = 0
        let start = ContinuousClock.now
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard count >= 0 else { throw Unavailable("read \(path)", errno: errno) }
            if count == 0 { break }
            total += count
        }
        return Double(total) / Double(1 << 20) / seconds(since: start)
    }

    /// Writes one line to stdout at once (a pipe: `print` would hold it).
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

/// Why fscrypt cannot be measured here, or what failed.
struct Unavailable: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }

    init(_ what: String, errno code: Int32) {
        description = "\(what): \(String(cString: strerror(code)))"
    }
}
