import DataProtection
import Foundation
import Glibc
import ProtectionTestSupport
import Testing

/// Issue 37 with the real daemon: no name or uid on disk in clear, and a
/// state directory of the first layout moves to sealed names even when
/// protd is killed with SIGKILL at random points of the move.
@Suite("Sealed names end to end", .serialized)
struct SealedNamesEndToEndTests {
    static let protctl = CommandRunner.builtProduct("protctl")

    @Test("files written by three uids in every class leave no name, component or uid in any path or byte of the state directory",
          .enabled(if: getuid() == 0, "needs root to write as other uids (setpriv)"))
    func nothingInClear() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0, socketMode: "0666")
        let uids: [UInt32] = [0, 4242, 271_828]
        let classes = ["none", "completeUntilFirstUserAuthentication", "completeUnlessOpen", "complete"]
        let names = ["Tax-Return-Aardvark.pdf", "Photos/Holiday-Flamingo/IMG-Quokka.jpg",
                     String(repeating: "Very-Long-Pangolin-", count: 10) + "/inner-Tapir"]
        for uid in uids {
            for (index, name) in names.enumerated() {
                let arguments = ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                                 Self.protctl, "--socket", daemon.socketPath,
                                 "write", name, "--protection", classes[(index + Int(uid % 4)) % 4]]
                let written = try CommandRunner.run(arguments[0], Array(arguments.dropFirst()), input: Array("body of \(name)".utf8))
                #expect(written.status == 0, "\(written.stderr)")
            }
        }
        daemon.stop()

        var paths: [String] = [], bytes: [UInt8] = []
        for relative in try FileManager.default.subpathsOfDirectory(atPath: daemon.stateDirectory) {
            paths.append(relative)
            var info = stat()
            let path = daemon.stateDirectory + "/" + relative
            if lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
                bytes += Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            }
        }
        let words = Set(names.flatMap { $0.split(separator: "/").map(String.init) })
            .union(["Aardvark", "Flamingo", "Quokka", "Pangolin", "Tapir", "Holiday", "Photos"])
        for word in words {
            #expect(!paths.contains { $0.contains(word) }, "\(word.prefix(20)) is in a path")
            #expect(!bytes.contains(subsequence: Array(word.utf8)), "\(word.prefix(20)) is in the bytes")
        }
        for uid in uids where uid != 0 {
            #expect(!paths.contains { $0.split(separator: "/").contains(Substring(String(uid))) }, "uid \(uid) names a directory")
            #expect(!bytes.contains(subsequence: (0..<4).map { UInt8(truncatingIfNeeded: uid >> (8 * $0)) }), "uid \(uid) in the bytes")
        }
        #expect(!paths.contains { $0.split(separator: "/").contains("0") }, "uid 0 names a directory")

        // Each owner still lists exactly its names.
        try daemon.start()
        for uid in uids {
            let listed = try CommandRunner.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                                                                    Self.protctl, "--socket", daemon.socketPath, "ls"])
            #expect(names.allSatisfy { listed.stdout.contains($0) }, "uid \(uid): \(listed.stdout) \(listed.stderr)")
        }
    }

    @Test("a first-layout state directory, its start killed with SIGKILL at random points in 20 rounds, loses nothing and finishes the move")
    func migrationSurvivesKill() async throws {
        let daemon = try DaemonProcess(gracePeriodSeconds: 0)
        let long = String(repeating: "long-component-", count: 12)
        let names = (0..<600).map { "dir\($0 % 12)/file-\($0)" } + ["\(long)/a", "dir0/\(long)", "top"]
        let client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<4 {
                group.addTask {
                    for (index, name) in names.enumerated() where index % 4 == lane {
                        try await client.file(name).write(Array(name.utf8), protection: index % 2 == 0 ? .none : .default)
                    }
                }
            }
            try await group.waitForAll()
        }
        await client.close()
        daemon.stop()
        let uid = getuid()
        try LegacyStoreLayout.convert(stateDirectory: daemon.stateDirectory, files: names.map { (uid, $0) })
        let template = daemon.directory.appending("legacy-template")
        try FileManager.default.copyItem(atPath: daemon.stateDirectory, toPath: template)

        var random = SeededGenerator(seed: 0x37_5EA1)
        var window = 0.0, interrupted = 0
        for round in 1...20 {
            try FileManager.default.removeItem(atPath: daemon.stateDirectory)
            try FileManager.default.copyItem(atPath: template, toPath: daemon.stateDirectory)
            if round == 1 {
                // The first round runs the whole start, to learn how long the kills may wait.
                let started = Date()
                try daemon.start()
                window = Date().timeIntervalSince(started)
                daemon.kill9()
            } else {
                try daemon.start(waitingForSocket: false)
                usleep(UInt32(Double.random(in: 0...window, using: &random) * 1_000_000))
                daemon.kill9()
            }
            // At the kill, every file is under its old path or its new one.
            var moved = 0
            for name in names {
                let old = FileManager.default.fileExists(atPath: daemon.stateDirectory + "/store/\(uid)/files/" + name)
                let new = FileManager.default.fileExists(atPath: try daemon.diskPath(name))
                #expect(old != new, "round \(round): \(name) is in exactly one place")
                if new { moved += 1 }
            }
            if moved > 0 && moved < names.count { interrupted += 1 }

            try daemon.start()
            let check = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            #expect(try await check.list().map(\.name).sorted() == names.sorted(), "round \(round)")
            for name in names where name.hasPrefix("dir3/") || name.count > 100 || name == "top" {
                #expect(try await check.file(name).read() == Array(name.utf8), "round \(round): \(name)")
            }
            await check.close()
            #expect(!FileManager.default.fileExists(atPath: daemon.stateDirectory + "/store/\(uid)"), "round \(round)")
            daemon.stop()
        }
        #expect(interrupted >= 3, "kills landed in the middle of the move in \(interrupted) of 19 rounds (window \(window) s)")
    }
}

private extension Array where Element == UInt8 {
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        return (0...(count - needle.count)).contains { self[$0] == needle[0] && self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
