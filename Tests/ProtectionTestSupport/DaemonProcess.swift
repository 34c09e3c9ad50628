public import Foundation
internal import ProtectionCore

/// The real `protd` binary, started in a temporary directory with its own
/// socket, state directory and a cheap (but real) Argon2id cost. Tests talk
/// to it through the real client library.
public final class DaemonProcess: @unchecked Sendable {
    /// The temporary directory holding socket, state and config.
    public let directory: TemporaryDirectory
    /// The socket path.
    public let socketPath: String
    /// The state directory (survives `restart()`).
    public let stateDirectory: String
    /// The config file used.
    public let configPath: String
    private var process: Process?
    private let logPath: String
    /// A command to run the binary under, e.g. `["qemu-x86_64", "-cpu",
    /// "Nehalem"]` for a CPU without AES-NI; empty to run it directly.
    /// Takes effect at the next `start()`.
    public var launcher: [String] = []
    /// Whether protd learns its socket path from PROTD_SOCKET, not the file.
    private var socketFromEnvironment = false

    /// How often start-up tries to connect while waiting for the daemon.
    public static let readinessPollMilliseconds = 2

    /// Path of the built `protd` next to the test bundle.
    public static var binaryPath: String {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("protd").path
    }

    /// Writes a config and starts protd; returns once it accepts connections.
    /// `extraConfig` is appended to the YAML (e.g. "lock:\n  grace-period-seconds: 0\n").
    /// `argon2` is the passcode cost (operations, KiB); the default is
    /// libsodium's cheapest, which is real Argon2id but fast for tests.
    /// `firstUnlockTimeout` is `lock.first-unlock-timeout` ("3", "1h", "0");
    /// nil leaves protd's default (72h).
    public init(gracePeriodSeconds: Double = 10, firstUnlockTimeout: String? = nil, socketMode: String = "0660",
                extraConfig: String = "",
                extraArguments: [String] = [], environment: [String: String] = [:],
                argon2: (operations: Int, memoryKiB: Int) = (1, 8), logLevel: String = "debug",
                parentDirectory: String? = nil, socketFromEnvironment: Bool = false) throws {
        directory = try TemporaryDirectory("daemon", in: parentDirectory)
        // Unix socket paths are limited to 107 bytes; keep it short.
        socketPath = directory.appending("s")
        stateDirectory = directory.appending("state")
        configPath = directory.appending("protd.yaml")
        logPath = directory.appending("protd.log")
        // With `socketFromEnvironment` the path reaches protd as
        // PROTD_SOCKET, the variable the client library reads too.
        let pathLine = socketFromEnvironment ? "" : "\n  path: \(socketPath)"
        let timeoutLine = firstUnlockTimeout.map { "\n  first-unlock-timeout: \($0)" } ?? ""
        let yaml = """
            socket:\(pathLine)
              mode: "\(socketMode)"
            state:
              directory: \(stateDirectory)
            lock:
              grace-period-seconds: \(gracePeriodSeconds)\(timeoutLine)
              admin-group: root
            passcode:
              argon2-operations: \(argon2.operations)
              argon2-memory-kib: \(argon2.memoryKiB)
            log:
              level: \(logLevel)

            """ + extraConfig
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
        self.socketFromEnvironment = socketFromEnvironment
        try start(extraArguments: extraArguments, environment: environment)
    }

    /// The daemon's environment: `inherited` without its `PROTD_*` settings,
    /// then `extra`.
    public static func childEnvironment(inheriting inherited: [String: String], adding extra: [String: String]) -> [String: String] {
        inherited.filter { !$0.key.hasPrefix("PROTD_") }.merging(extra) { $1 }
    }

    /// Starts the binary and waits for its socket. `environment` entries are
    /// added to the test's own environment, less any `PROTD_*` setting in
    /// it: those outrank the configuration file, so one left in a
    /// developer's shell (a socket path, an Argon2 cost) would change every
    /// daemon a test or the benchmark starts. With `waitingForSocket`
    /// false it returns as soon as the process runs (to kill it mid-start).
    public func start(extraArguments: [String] = [], environment: [String: String] = [:],
                      waitingForSocket: Bool = true) throws {
        let process = Process()
        let command = launcher + [Self.binaryPath, "--config", configPath] + extraArguments
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let socketVariable = socketFromEnvironment ? ["PROTD_SOCKET": socketPath] : [:]
        process.environment = Self.childEnvironment(inheriting: ProcessInfo.processInfo.environment,
                                                    adding: environment.merging(socketVariable) { $1 })
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        try process.run()
        self.process = process
        LiveDaemons.shared.started(self, pid: process.processIdentifier, directory: directory.path)
        if waitingForSocket { try waitForSocket() }
    }

    /// The process id of the running daemon.
    public var pid: Int32 { process?.processIdentifier ?? 0 }

    /// Stops the daemon with SIGSTOP and returns once the kernel shows it
    /// stopped (at most 5 s): a signal is only queued when `kill` returns.
    public func suspend() {
        guard pid > 0, kill(pid, SIGSTOP) == 0 else { return }
        let deadline = Date().addingTimeInterval(5)
        while ProcessStat(pid: pid)?.state != "T", Date() < deadline { usleep(1000) }
    }

    /// Lets a suspended daemon run again.
    public func resume() {
        if pid > 0 { kill(pid, SIGCONT) }
    }

    /// Sends SIGTERM and waits; returns the exit status and how long it took.
    @discardableResult
    public func stop(timeout: TimeInterval = 15) -> (status: Int32, seconds: Double)? {
        guard let process, process.isRunning else { return nil }
        let started = Date()
        process.terminate()
        while process.isRunning && Date().timeIntervalSince(started) < timeout { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        self.process = nil
        LiveDaemons.shared.exited(self)
        return (process.terminationStatus, Date().timeIntervalSince(started))
    }

    /// Kills with SIGKILL (a crash) and waits.
    public func kill9() {
        guard let process else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
        LiveDaemons.shared.exited(self)
    }

    /// Stops and starts again on the same state (a daemon restart).
    public func restart() throws {
        stop()
        try start()
    }

    /// The temporary files of whole-file writes in progress or left by a
    /// crash (`<uid>/tmp/`), relative to the state directory.
    public func writeTemporaries() throws -> [String] {
        try FileManager.default.subpathsOfDirectory(atPath: stateDirectory).filter { $0.contains("/tmp/") }
    }

    /// Everything the daemon logged so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Resident set size of the daemon in KiB, from /proc.
    public var residentKiB: Int? { Self.residentKiB(pid: pid) }

    /// VmRSS of `pid` in KiB.
    public static func residentKiB(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "")
        }
        return nil
    }

    private func waitForSocket() throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            // The socket file appears at bind(); only a connect proves listen().
            if FileManager.default.fileExists(atPath: socketPath), let probe = try? RawConnection(path: socketPath) {
                probe.close()
                return
            }
            if let process, !process.isRunning {
                throw DaemonFailed("protd exited with \(process.terminationStatus) before serving:\n\(log)")
            }
            usleep(UInt32(Self.readinessPollMilliseconds * 1000))
        }
        throw DaemonFailed("protd did not create its socket within 20 s:\n\(log)")
    }

    deinit {
        stop()
        directory.remove()
        LiveDaemons.shared.forget(self)
    }
}

/// The daemon did not start.
public struct DaemonFailed: Error, CustomStringConvertible {
    /// Why, with the daemon's log.
    public let description: String
    init(_ description: String) { self.description = description }
}

extension DaemonProcess {
    /// Where the daemon's store keeps `name` of `uid` (by default the test
    /// process's) on disk, worked out from its key bag and device secret.
    public func diskPath(_ name: String, uid: UInt32 = getuid()) throws -> String {
        try layout().path(of: name, uid: uid)
    }

    /// The directory of `uid`'s namespace (`<state>/store/<sealed uid>`).
    public func namespaceDirectory(uid: UInt32 = getuid()) throws -> String {
        try layout().namespaceDirectory(uid: uid)
    }

    private func layout() throws -> StoreLayout {
        let secret = try DeviceSecret.load(from: .file(path: stateDirectory + "/device-key"))
        return try StoreLayout(stateDirectory: stateDirectory, deviceSecret: secret)
    }
}
