// libFuzzer target: the stored file format (docs/FORMAT.md). An input is
// the bytes of one protected file: header, wrapped file key in its slot,
// segments. They are written to a scratch file and read the two ways the
// store reads a file, with fixed class keys, so that a mutated seed (every
// seed is a valid file under these keys) reaches the authenticated paths:
// unwrapping the key, the header tag, opening segments.
//
// - `EncryptedFile.open`, then a read of the whole content and of a range
//   inside it (what a handle does);
// - `EncryptedFile.readWhole` (a small file's one-off read).
//
// Each gives the content or a `ProtectionError` of `integrityFailure` (or
// `cipherUnavailable`, for a cipher this machine lacks), and the two agree.
// A trap, another error, or disk I/O inside a key window (which debug
// builds count) stops the fuzzer with the input.
//
// `PROTD_FUZZ_WRITE_SEEDS=DIR FuzzFormat` writes the seed corpus into DIR
// and exits. Every start first checks that those seeds read back.

internal import Glibc
@testable internal import ProtectionCore
internal import Sodium

/// The fixed class keys (32 bytes each). Class B's public key is the
/// X25519 public key of `classBPrivate` (`crypto_scalarmult_base`);
/// `selfCheck` fails if the two ever stop matching.
private let classA = "protd fuzz: class A key, 32 byte"
private let classBPrivate = "protd fuzz: class B private key."
private let classBPublic: [UInt8] = [
    0xed, 0xb6, 0xe4, 0xf8, 0xe2, 0xf7, 0xcf, 0x10, 0x03, 0x25, 0x4f, 0x21, 0xce, 0x86, 0x26, 0x60,
    0x12, 0xbe, 0xbe, 0xd8, 0x2c, 0x40, 0x64, 0x36, 0x2b, 0xce, 0xbc, 0x8b, 0x1a, 0x64, 0xaa, 0x33,
]
private let classC = "protd fuzz: class C key, 32 byte"
private let classD = "protd fuzz: class D key, 32 byte"

/// Every class key in memory: the state of an unlocked daemon.
private let keys: ClassKeys = {
    do {
        return ClassKeys(a: try SecretBytes(utf8: classA), bPrivate: try SecretBytes(utf8: classBPrivate),
                         bPublic: classBPublic, c: try SecretBytes(utf8: classC), d: try SecretBytes(utf8: classD))
    } catch {
        fatalError("cannot make the fixed class keys: \(error)")
    }
}()

/// The scratch file each input is written to: unlinked at once, so nothing
/// is left behind.
private let scratch: Int32 = {
    let directory = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    var template = Array("\(directory)/protd-fuzz-format.XXXXXX".utf8CString)
    let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard fd >= 0 else { fatalError("cannot make a scratch file: \(String(cString: strerror(errno)))") }
    template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
    return fd
}()

private let scratchPath = "fuzz-input"

/// Where every input is taken to be: its header is bound to this
/// namespace and name (docs/FORMAT.md 1.2).
private let binding = FileBinding(try! FileName(scratchPath), in: Namespace(uid: 1000))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFormat(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    load(UnsafeRawBufferPointer(start: start, count: start == nil ? 0 : count))
    _ = readBothWays()
    precondition(Posix.ioInsideKeyWindowOnThisThread == 0, "disk I/O inside a key window")
    return 0
}

/// Makes the scratch file hold exactly `bytes`.
private func load(_ bytes: UnsafeRawBufferPointer) {
    guard ftruncate(scratch, 0) == 0, bytes.isEmpty || pwrite(scratch, bytes.baseAddress, bytes.count, 0) == bytes.count
    else { fatalError("cannot write the scratch file: \(String(cString: strerror(errno)))") }
}

/// What reading the scratch file gave: its content, or the error's code.
private enum Outcome: Equatable {
    case content([UInt8])
    case refused(ProtectionError.Code)
}

/// Reads the scratch file through a handle and in one go; the two agree.
private func readBothWays() -> Outcome {
    let handle = readThroughHandle()
    let whole = readWhole()
    // Both authenticate every segment and the header, so they refuse the
    // same files (the message may differ).
    precondition(handle == whole, "a handle's read gave \(handle), the one-off read \(whole)")
    return handle
}

/// `EncryptedFile.open`, then the whole content and a range inside it.
private func readThroughHandle() -> Outcome {
    let fd = dup(scratch)
    precondition(fd >= 0, "dup: \(String(cString: strerror(errno)))")
    let file: EncryptedFile
    do {
        file = try EncryptedFile.open(fd: fd, path: scratchPath, binding: binding, keys: keys)
    } catch {
        close(fd)  // Still the caller's when open fails.
        return refusal(error)
    }
    defer { file.close() }
    do {
        let size = file.size
        let all = try file.read(offset: 0, count: size)
        precondition(all.count == size, "read \(all.count) of \(size) bytes")
        let from = size / 3
        let part = try file.read(offset: from, count: size / 3 + 1)
        precondition(part[...] == all[from..<min(size, from + size / 3 + 1)], "a range read differs from the whole")
        return .content(all)
    } catch {
        return refusal(error)
    }
}

/// `EncryptedFile.readWhole`, as the store reads a small file.
private func readWhole() -> Outcome {
    do {
        let content = try EncryptedFile.readWhole(fd: scratch, path: scratchPath, binding: binding, keys: keys,
                                                  range: 0..<Int.max,
                                                  ifAtMost: Int.max) { count, fill in
            var bytes = [UInt8](repeating: 0xA5, count: count)
            do {
                try bytes.withUnsafeMutableBytes { try fill($0) }
            } catch {
                precondition(bytes.allSatisfy { $0 == 0 }, "a failed read left bytes in the buffer")
                throw error
            }
            return bytes
        }
        guard let content else { preconditionFailure("readWhole declined a file under its limit of Int.max") }
        return .content(content)
    } catch {
        return refusal(error)
    }
}

/// The code of an error reading a file may give: the file is not intact,
/// or (intact) its cipher cannot run here. Anything else is a bug.
private func refusal(_ error: any Error) -> Outcome {
    guard let error = error as? ProtectionError, error.code == .integrityFailure || error.code == .cipherUnavailable else {
        preconditionFailure("reading a file threw \(type(of: error)) \(error), not an integrity failure")
    }
    return .refused(error.code)
}

// MARK: - Seeds

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>?,
                       _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    let seeds = makeSeeds()
    selfCheck(seeds)
    // The corpus directories on the command line: a committed seed of a
    // name written here must still read back (after a format change, say).
    let arguments = (0..<Int(argc?.pointee ?? 0)).compactMap { argv?.pointee?[$0].map { String(cString: $0) } }
    for directory in arguments.dropFirst() where !directory.hasPrefix("-") {
        checkCommitted(seeds, in: directory)
    }
    if let directory = getenv("PROTD_FUZZ_WRITE_SEEDS") {
        for (name, bytes, _) in seeds {
            let path = String(cString: directory) + "/" + name
            guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
            _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
        exit(0)
    }
    return 0
}

/// Valid files under the fixed keys, with 1 KiB segments so a few KiB hold
/// several: an empty file in every class, a short one in AES-256-GCM and
/// AEGIS-256, and one of three segments. A seed whose cipher this machine
/// cannot run is left out. The committed seeds (corpus/format/) were written
/// against Debian 12's libsodium 1.0.18, which has no AEGIS-256, so none of
/// them is AEGIS-256 (`make fuzz-seeds` adds one where libsodium 1.0.19 or
/// later and the CPU's AES instructions run it).
private func makeSeeds() -> [(name: String, bytes: [UInt8], content: [UInt8])] {
    let short = Array("small secret".utf8)
    let threeSegments = (0..<2100).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    let files: [(String, ProtectionClass, ContentCipher, [UInt8])] = [
        ("empty-A-xchacha", .complete, .xChaCha20Poly1305, []),
        ("empty-B-xchacha", .completeUnlessOpen, .xChaCha20Poly1305, []),
        ("empty-C-xchacha", .completeUntilFirstUserAuthentication, .xChaCha20Poly1305, []),
        ("empty-D-xchacha", .none, .xChaCha20Poly1305, []),
        ("short-B-xchacha", .completeUnlessOpen, .xChaCha20Poly1305, short),
        ("short-C-aes256gcm", .completeUntilFirstUserAuthentication, .aes256GCM, short),
        ("short-D-aegis256", .none, .aegis256, short),
        ("three-segments-A-xchacha", .complete, .xChaCha20Poly1305, threeSegments),
    ]
    return files.compactMap { name, protection, cipher, content in
        // A seed needs its cipher here to be written (and to be checked
        // against a committed copy of the same name).
        guard cipher.isAvailable else { return nil }
        return (name, write(content, protection: protection, cipher: cipher), content)
    }
}

/// A file of `content` as the store writes it.
private func write(_ content: [UInt8], protection: ProtectionClass, cipher: ContentCipher) -> [UInt8] {
    guard ftruncate(scratch, 0) == 0 else { fatalError("ftruncate: \(String(cString: strerror(errno)))") }
    let fd = dup(scratch)
    do {
        let file = try EncryptedFile.create(fd: fd, path: scratchPath, protection: protection,
                                            format: ContentFormat(segmentSize: 1024, cipher: cipher), binding: binding,
                                            keys: keys)
        try content.withUnsafeBytes { try file.write($0, at: 0) }
        file.close()
    } catch {
        fatalError("cannot write a seed: \(error)")
    }
    let length = Int(lseek(scratch, 0, SEEK_END))
    var bytes = [UInt8](repeating: 0, count: length)
    guard bytes.withUnsafeMutableBytes({ pread(scratch, $0.baseAddress, length, 0) }) == length else {
        fatalError("cannot read a seed back")
    }
    return bytes
}

/// Each file in `directory` named as one of `seeds` reads back as that
/// seed's content.
private func checkCommitted(_ seeds: [(name: String, bytes: [UInt8], content: [UInt8])], in directory: String) {
    for (name, _, content) in seeds {
        guard let file = fopen(directory + "/" + name, "rb") else { continue }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while case let count = chunk.withUnsafeMutableBytes({ fread($0.baseAddress, 1, $0.count, file) }), count > 0 {
            bytes += chunk[..<count]
        }
        fclose(file)
        bytes.withUnsafeBytes { load($0) }
        guard readBothWays() == .content(content) else {
            fatalError("\(directory)/\(name) does not read back under the fixed keys: write the seeds again (make fuzz-seeds)")
        }
    }
}

/// Every seed reads back as its content: the keys above open what they
/// wrote, so the fuzzer starts from files that pass every check.
private func selfCheck(_ seeds: [(name: String, bytes: [UInt8], content: [UInt8])]) {
    for (name, bytes, content) in seeds {
        bytes.withUnsafeBytes { load($0) }
        guard readBothWays() == .content(content) else {
            fatalError("seed \(name) does not read back under the fixed keys")
        }
    }
}
