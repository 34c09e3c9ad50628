internal import Glibc

/// A system call that failed on a file or a socket, with errno's text.
public struct SystemCallFailure: Error, CustomStringConvertible {
    public let description: String

    /// The failure of `call` on `subject`, with the error `code`.
    public init(_ call: String, _ subject: String, errno code: Int32) {
        description = "\(call) \(subject): \(String(cString: strerror(code)))"
    }

    /// The failure of `call` on `subject`, with the current `errno`.
    public init(_ call: String, _ subject: String) {
        self.init(call, subject, errno: errno)
    }
}
