import Foundation
import Glibc
import ProtectionTestSupport

/// The lock fan-out's floor on this machine: the same subscriber processes
/// (`protd-bench-subscribers --plain`), on plain Unix sockets served by
/// protd-bench itself, with no protd and no client library. Each lock is an
/// 8-byte write to every connection and an 8-byte acknowledgement read
/// back from each: what notifying that many connections in other processes
/// and hearing back from all of them costs here before any of protd's work.
struct FanOutFloor {
    /// Why the floor cannot run for `subscribers`, or nil: the children
    /// connect before protd-bench accepts, so they must all fit in the
    /// listening socket's backlog, which the kernel caps at
    /// net.core.somaxconn.
    static func unavailableReason(subscribers: Int) -> String? {
        let text = (try? String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8)) ?? ""
        guard let limit = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), subscribers > limit else { return nil }
        return "\(subscribers) subscribers exceed net.core.somaxconn (\(limit)), the backlog they must fit in"
    }

    /// Runs the floor in `directory` (its socket goes there).
    static func measure(subscribers: Int, rounds: Int, directory: String) async throws -> FanOutTimes {
        let path = directory + "/floor-\(getpid()).sock"
        unlink(path)
        guard let listener = unixSocket(type: Int32(SOCK_STREAM.rawValue), path: path, bind) else {
            throw SystemCallFailure("bind", path)
        }
        defer {
            close(listener)
            unlink(path)
        }
        guard listen(listener, Int32(subscribers)) == 0 else {
            throw SystemCallFailure("listen", path)
        }
        // The children connect into the backlog and say ready; accept afterwards.
        let fleet = try await SubscriberFleet.launch(subscribers: subscribers, socketPath: path, arguments: ["--plain"])
        defer { fleet.stop() }
        var connections: [Int32] = []
        defer { for fd in connections { close(fd) } }
        for _ in 0..<subscribers {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { throw SystemCallFailure("accept", path) }
            connections.append(fd)
        }
        var result = FanOutTimes()
        for round in 1...UInt64(rounds) {
            let started = ContinuousClock.now
            for fd in connections {
                var sequence = round
                guard write(fd, &sequence, 8) == 8 else { throw BenchFailure("a floor subscriber went away") }
            }
            for fd in connections {
                var acknowledged: UInt64 = 0
                guard read(fd, &acknowledged, 8) == 8, acknowledged == round else {
                    throw BenchFailure("a floor subscriber did not acknowledge round \(round)")
                }
            }
            result.completion.append(seconds(since: started))
            let sent = fleet.origin.duration(to: started)
            result.deliveryRounds.append(try await fleet.nextDelivery().map { ($0 - sent) / .seconds(1) })
        }
        return result
    }
}

/// Delivery latencies (one list per round) and completion times (one per
/// round) of a fan-out, in seconds.
struct FanOutTimes {
    var deliveryRounds: [[Double]] = []
    var completion: [Double] = []

    /// The `p` quantile of delivery (0...1) in each round, in milliseconds:
    /// the figure is their median, with the rounds' min and max.
    func deliveryMilliseconds(_ p: Double) -> Sample {
        Sample(values: deliveryRounds.map { round in
            let sorted = round.sorted()
            return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000
        })
    }

    /// Completion times in milliseconds.
    var completionMilliseconds: Sample { Sample(values: completion.map { $0 * 1000 }) }
}
