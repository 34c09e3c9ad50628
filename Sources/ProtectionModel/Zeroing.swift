#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Overwrites ordinary memory that held file content or a passcode with
/// zeros once it is no longer needed, with `explicit_bzero` (`memset_s` on
/// Darwin), which the compiler may not drop as a dead store before a free.
public enum Zeroing {
    /// Zeroes `bytes`.
    public static func wipe(_ bytes: UnsafeMutableRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        #if canImport(Darwin)
        _ = memset_s(base, bytes.count, 0, bytes.count)
        #else
        explicit_bzero(base, bytes.count)
        #endif
    }

    /// Zeroes an array the caller owns, in place.
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { wipe($0) }
    }

    /// Zeroes memory that other values share and that nobody reads again:
    /// the storage of a received frame, or of a decoded passcode that the
    /// request holding it shares. Their types lend it read-only (a mutable
    /// view would copy it first, and zero only the copy), so it is written
    /// through the read-only pointer. Only for heap memory that holds no
    /// constant.
    public static func wipeShared(_ bytes: UnsafeRawBufferPointer) {
        wipe(UnsafeMutableRawBufferPointer(mutating: bytes))
    }

    /// Zeroes the storage of `bytes` in place, for every array that shares
    /// it (`wipeShared(_:)`).
    public static func wipeShared(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { wipeShared($0) }
    }
}
