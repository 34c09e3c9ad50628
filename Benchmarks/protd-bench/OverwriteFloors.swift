import Foundation
import ProtectionCore
import ProtectionTestSupport
import Sodium

/// What any small overwrite of an encrypted file kept by a daemon costs at
/// the least, with nothing of protd's: the crypto of rewriting one segment,
/// and one request's round trip between two threads over a Unix socket.
enum OverwriteFloors {
    /// Seconds per segment to open one sealed 64 KiB segment and seal it
    /// again with `cipher`, as a 4 KiB write into it must (same
    /// construction as protd's files, subkey per segment included).
    static func segmentRewrite(_ cipher: ContentCipher, count: Int) throws -> Double {
        let aead = cipher.aead
        let segment = LargeFileWorkload.segment
        let key = try SecretBytes.random(count: 32)
        let nonce = try SecureRandom.bytes(aead.nonceByteCount)
        let ad = [UInt8](repeating: 1, count: 25)
        var plain = [UInt8](repeating: 0x5A, count: segment)
        var sealed = [UInt8](repeating: 0, count: segment + aead.tagByteCount)
        let start = ContinuousClock.now
        try key.whileReadable {
            try ad.withUnsafeBytes { a in
                try nonce.withUnsafeBytes { n in
                    for _ in 0...count {
                        try plain.withUnsafeBytes { p in
                            try sealed.withUnsafeMutableBytes { try aead.seal(p, additionalData: a, nonce: n, key: key, into: $0) }
                        }
                        try sealed.withUnsafeBytes { s in
                            try plain.withUnsafeMutableBytes { try aead.open(s, additionalData: a, nonce: n, key: key, into: $0) }
                        }
                    }
                }
            }
        }
        // count + 1 seals and opens: the first seal makes what the first open reads.
        return seconds(since: start) / Double(count + 1)
    }

    /// Seconds per round trip of a 64-byte message between this thread and
    /// an echoing thread over a Unix stream socket pair.
    static func socketRoundTrip(count: Int) throws -> Double {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
            throw BenchFailure("socketpair failed: errno \(errno)")
        }
        defer { close(fds[0]); close(fds[1]) }
        let echo = fds[1]
        let done = DispatchSemaphore(value: 0)
        Thread {
            var message = [UInt8](repeating: 0, count: 64)
            while Self.exchange(echo, &message, sendFirst: false) {}
            done.signal()
        }.start()
        var message = [UInt8](repeating: 7, count: 64)
        let start = ContinuousClock.now
        for _ in 0..<count {
            guard Self.exchange(fds[0], &message, sendFirst: true) else { throw BenchFailure("the echo thread stopped") }
        }
        let elapsed = seconds(since: start)
        shutdown(fds[0], Int32(SHUT_WR))
        done.wait()
        return elapsed / Double(count)
    }

    /// Sends `message` then reads it back whole, or (for the echo) the other
    /// way round; false when the peer closed or a call failed.
    private static func exchange(_ fd: Int32, _ message: inout [UInt8], sendFirst: Bool) -> Bool {
        func send() -> Bool { message.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == 64 }
        func receive() -> Bool {
            var got = 0
            while got < 64 {
                let count = message.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress! + got, 64 - got, 0) }
                guard count > 0 else { return false }
                got += count
            }
            return true
        }
        return sendFirst ? send() && receive() : receive() && send()
    }
}
