/// How failed unlock attempts are throttled: a delay after each count of
/// consecutive failures, and optionally erasing every key after N.
public struct FailedAttemptPolicy: Sendable, Equatable {
    /// `delays[n - 1]` is the wait in seconds after the n-th consecutive
    /// failure; the last entry applies to every later failure.
    public var delaysInSeconds: [Int64]
    /// Erase every key after this many consecutive failures; `nil` = never.
    public var eraseAfter: Int?

    /// Makes a policy; `delaysInSeconds` must not be empty or negative.
    public init(delaysInSeconds: [Int64], eraseAfter: Int? = nil) throws {
        guard !delaysInSeconds.isEmpty, delaysInSeconds.allSatisfy({ $0 >= 0 }) else {
            throw ProtectionError(.invalidArgument, "failed-attempt delays must be a non-empty list of non-negative seconds")
        }
        if let eraseAfter, eraseAfter < 1 {
            throw ProtectionError(.invalidArgument, "erase-after must be at least 1 failed attempt")
        }
        self.delaysInSeconds = delaysInSeconds
        self.eraseAfter = eraseAfter
    }

    /// 1-4 failures: none; 5th: 1 min; 6th: 5 min; 7th-8th: 15 min;
    /// 9th and later: 1 hour. No erase.
    public static let standard = try! FailedAttemptPolicy(delaysInSeconds: [0, 0, 0, 0, 60, 300, 900, 900, 3600])

    /// The wait after `failures` consecutive failures.
    public func delay(afterFailures failures: Int) -> Int64 {
        guard failures > 0 else { return 0 }
        return delaysInSeconds[min(failures, delaysInSeconds.count) - 1]
    }

    /// Seconds until another attempt is allowed, given the record.
    public func secondsUntilNextAttempt(failures: Int, lastAttemptAt: Int64, now: Int64) -> Int64 {
        let delay = delay(afterFailures: failures)
        guard delay > 0 else { return 0 }
        // A clock that went backwards must not shorten the wait.
        let elapsed = max(0, now - lastAttemptAt)
        return now < lastAttemptAt ? delay : max(0, delay - elapsed)
    }
}
