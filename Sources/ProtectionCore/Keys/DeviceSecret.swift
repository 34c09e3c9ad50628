internal import Glibc
public import Sodium

/// The device secret: 32 random bytes that play the role of the hardware
/// UID. Every passcode-derived key is tangled with it, so guessing a
/// passcode needs this machine's secret.
public enum DeviceSecret {
    /// Length of the secret in bytes.
    public static let byteCount = 32
    /// The systemd credential name (`LoadCredentialEncrypted=device-key`).
    public static let credentialName = "device-key"

    /// Where the secret comes from.
    public enum Source: Sendable, Equatable {
        /// A file that must exist (a systemd credential).
        case credential(path: String)
        /// A file created with mode 0600 on first use.
        case file(path: String)

        /// The file the secret is read from.
        public var path: String {
            switch self {
            case .credential(let path), .file(let path): path
            }
        }
    }

    /// Reads the secret from `source`, creating the fallback file when
    /// absent. The bytes go straight from the file into guarded memory.
    public static func load(from source: Source) throws -> SecretBytes {
        switch source {
        case .credential(let path):
            return try read(path)
        case .file(let path):
            if !Posix.exists(path) { try create(path) }
            try checkPrivate(path)
            return try read(path)
        }
    }

    /// Reads the secret at `source` when it is there, creating nothing: a
    /// former secret kept for a migration (`DeviceSecretMigration`).
    static func loadIfPresent(_ source: Source) throws -> SecretBytes? {
        guard Posix.exists(source.path) else { return nil }
        return try read(source.path)
    }

    /// Destroys a former secret file: overwrites it with zeros, fsyncs,
    /// unlinks it and fsyncs its directory. A credential is systemd's and
    /// left alone. (On a copy-on-write or flash file system the old blocks
    /// may survive the overwrite; the unlink is what counts there.)
    static func destroy(_ source: Source) throws {
        guard case .file(let path) = source, Posix.exists(path) else { return }
        let fd = try Posix.open(path, O_WRONLY)
        defer { close(fd) }
        let zeros = [UInt8](repeating: 0, count: max(byteCount, try Posix.size(fd, path: path)))
        try zeros.withUnsafeBytes { try Posix.pwrite(fd, $0, at: 0, path: path) }
        try Posix.fsync(fd, path: path)
        try Posix.unlink(path)
        try Posix.fsyncDirectory(Posix.parentDirectory(of: path))
    }

    /// Removes the temporary files a start interrupted while creating the
    /// fallback file left next to it (`<path>.tmp-<32 hex>`). A credential
    /// is systemd's and left alone.
    static func removeLeftoverTemporaryFiles(for source: Source) throws {
        guard case .file(let path) = source else { return }
        let prefix = PathBytes.lastComponent(of: path) + temporaryInfix
        try Posix.removeFiles(in: Posix.parentDirectory(of: path)) { SecureRandomName.matches($0, prefix: prefix) }
    }

    /// What `create` puts between the file's path and the random part of
    /// its temporary file's name.
    private static let temporaryInfix = ".tmp-"

    /// Refuses a secret file that other users could read or replace.
    private static func checkPrivate(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw Posix.error("stat", path) }
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_mode & 0o077 == 0, info.st_uid == geteuid() else {
            throw ProtectionError(.keyBagCorrupt,
                                  "device secret \(path) must be a regular file owned by this user with mode 0600")
        }
    }

    private static func read(_ path: String) throws -> SecretBytes {
        let fd = try Posix.open(path, O_RDONLY)
        defer { close(fd) }
        guard try Posix.size(fd, path: path) == byteCount else {
            throw ProtectionError(.keyBagCorrupt,
                                  "device secret \(path) must be exactly \(byteCount) bytes (make one with: head -c \(byteCount) /dev/urandom)")
        }
        // Read into ordinary memory first, so no key window spans the read
        // (the bytes are on disk in the clear anyway), then zeroed.
        var bytes = [UInt8](repeating: 0, count: byteCount)
        defer { zeroFill(&bytes) }
        guard try bytes.withUnsafeMutableBytes({ try Posix.pread(fd, into: $0, at: 0, path: path) }) == byteCount else {
            throw ProtectionError(.keyBagCorrupt, "device secret \(path) changed while reading")
        }
        return try bytes.withUnsafeBytes { try SecretBytes(copying: $0) }
    }

    /// Writes a fresh secret to a temporary file, fsyncs it and links it into
    /// place, so a crash never leaves a short secret and two starts racing
    /// cannot both create one. The secret is written from ordinary memory,
    /// zeroed after (`load` reads it back into guarded memory), so no key
    /// window spans the write.
    private static func create(_ path: String) throws {
        let directory = Posix.parentDirectory(of: path)
        try Posix.makeDirectories(directory)
        var secret = try SecureRandom.bytes(byteCount)
        defer { zeroFill(&secret) }
        let temporary = path + temporaryInfix + (try SecureRandomName.make())
        let fd = try Posix.open(temporary, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        defer {
            close(fd)
            unlink(temporary)
        }
        try secret.withUnsafeBytes { try Posix.pwrite(fd, $0, at: 0, path: temporary) }
        try Posix.fsync(fd, path: temporary)
        if link(temporary, path) != 0 && errno != EEXIST {
            throw Posix.error("create device secret", path)
        }
        try Posix.fsyncDirectory(directory)
    }
}
