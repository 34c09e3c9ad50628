import Foundation

/// Where `protctl read --output PATH` puts plaintext. A regular file (or a
/// new one) is replaced atomically: the content goes to a private (0600)
/// temporary file beside it, renamed over the target only once the whole
/// read succeeded, so a failed read leaves the old file as it was. Anything
/// else (`/dev/null`, a FIFO, a terminal) is opened and written in place;
/// replacing it with a regular file would break the system. Standard
/// output is written in place too, and left open.
final class OutputFile {
    private let target: String
    private let temporaryPath: String?
    private let fd: Int32
    private let ownsDescriptor: Bool
    private var finished = false

    /// Writes to standard output (without `Data` copies of each chunk).
    static func standardOutput() -> OutputFile { OutputFile() }

    private init() {
        target = "standard output"
        temporaryPath = nil
        fd = STDOUT_FILENO
        ownsDescriptor = false
    }

    /// Opens `path` for writing as described above.
    init(path: String) throws {
        target = path
        ownsDescriptor = true
        var info = stat()
        if stat(path, &info) == 0 && (info.st_mode & S_IFMT) != S_IFREG {
            fd = open(path, O_WRONLY | O_CLOEXEC)
            temporaryPath = nil
        } else {
            let directory = (path as NSString).deletingLastPathComponent
            var template = Array(((directory.isEmpty ? "." : directory) + "/.protctl-output-XXXXXX").utf8CString)
            fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            temporaryPath = fd >= 0 ? String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        }
        guard fd >= 0 else {
            throw CommandFailure(description: "cannot write \(path): \(String(cString: strerror(errno)))", exitCode: 73)
        }
    }

    /// Writes all of `bytes`.
    func write(_ bytes: [UInt8]) throws {
        guard bytes.withUnsafeBytes({ writeAll(fd, $0) }) else {
            throw CommandFailure(description: "cannot write \(target): \(String(cString: strerror(errno)))", exitCode: 73)
        }
    }

    /// Closes the file and, for a regular file, puts it in place.
    func commit() throws {
        finished = true
        guard ownsDescriptor else { return }
        let closed = close(fd)
        guard let temporaryPath else { return }
        guard closed == 0, rename(temporaryPath, target) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporaryPath)
            throw CommandFailure(description: "cannot write \(target): \(reason)", exitCode: 73)
        }
    }

    /// After a failure: closes and drops the temporary file; the target
    /// stays as it was.
    deinit {
        guard !finished, ownsDescriptor else { return }
        close(fd)
        if let temporaryPath { unlink(temporaryPath) }
    }
}
