import Glibc

/// A system call that failed on a file or a socket, with errno's text.
struct SystemCallFailure: Error, CustomStringConvertible {
    let description: String

    init(_ call: String, _ subject: String, errno code: Int32 = errno) {
        description = "\(call) \(subject): \(String(cString: strerror(code)))"
    }
}
