import Foundation
import Glibc
import ProtectionCore
import ProtectionTestSupport
import Sodium
import Synchronization
import Testing

@Suite("Creates are atomic: a name never shows a file without a valid header")
struct AtomicCreateTests {
    @Test("readers racing handle creates never see integrityFailure, only notFound or the new file")
    func readersRacingCreates() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        let namespace = fixture.namespace
        let rounds = 400
        let created = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            if worker == 0 {
                for round in 0..<rounds {
                    do {
                        let handle = try store.open(try FileName("race-\(round)"), in: namespace,
                                                    mode: .createNew(.completeUnlessOpen))
                        try handle.write([UInt8](repeating: 1, count: 100), at: 0)
                        handle.close()
                    } catch {
                        failures.withLock { $0.append("create \(round): \(error)") }
                    }
                    created.store(round + 1, ordering: .releasing)
                }
                return
            }
            // Readers try the name being created (and the one after it).
            while created.load(ordering: .acquiring) < rounds {
                let round = created.load(ordering: .acquiring) + (worker - 1)
                guard let name = try? FileName("race-\(round)") else { continue }
                for attempt in 0..<3 {
                    do {
                        switch attempt {
                        case 0: _ = try store.attributes(of: name, in: namespace)
                        case 1: _ = try store.read(name, in: namespace)
                        default: try store.open(name, in: namespace, mode: .existing).close()
                        }
                    } catch let error as ProtectionError where error.code == .notFound {
                        continue
                    } catch {
                        failures.withLock { $0.append("\(name) attempt \(attempt): \(error)") }
                    }
                }
            }
        }
        let seen = failures.withLock { $0 }
        #expect(seen.count == 0, "\(seen.count) failures, first: \(seen.prefix(3))")
        #expect(try store.list(in: namespace).count == rounds)
    }

    /// Runs protd-crash-probe with crash points 1, 2, ... until the
    /// operation completes, checking after every crash that a restart
    /// finds either no file or the whole one, and no temporary file left.
    @Test("a create or whole-file write killed before any of its disk I/O calls leaves no broken name",
          arguments: ["create", "write"])
    func crashAtEveryStep(operation: String) throws {
        let probe = CommandRunner.builtProduct("protd-crash-probe")
        let name = try FileName("crash/target")
        var crashes = 0
        for crashPoint in 1...200 {
            let directory = try TemporaryDirectory("crash")
            defer { directory.remove() }
            let result = try CommandRunner.run(probe, [directory.path, "\(crashPoint)", operation, name.value])
            #expect(result.status == 0 || result.status == 86, "probe: \(result.stderr)")
            let store = try ProtectedStore(configuration: StoreConfiguration(stateDirectory: directory.path,
                                                                            passcodeCost: .minimum))
            defer { store.shutdown() }
            let namespace = Namespace(uid: 1000)
            let listed = try store.list(in: namespace).map(\.name)
            do {
                let content = try store.read(name, in: namespace)
                #expect(listed == [name], "crash point \(crashPoint): a readable file is listed")
                let expected = operation == "create" ? [] : [UInt8](repeating: 7, count: 3 * 65536 + 5)
                #expect(content == expected, "crash point \(crashPoint): the file holds what was written")
                try store.open(name, in: namespace, mode: .existing).close()
            } catch let error as ProtectionError where error.code == .notFound {
                #expect(listed.isEmpty, "crash point \(crashPoint): nothing is listed")
                #expect(result.status == 86, "a finished \(operation) left its file")
            }
            let scratch = (try? FileManager.default.contentsOfDirectory(atPath: try StoreLayout(stateDirectory: directory.path, deviceSecret: DeviceSecret.load(from: .file(path: directory.path + "/device-key"))).namespaceDirectory(uid: 1000) + "/tmp")) ?? []
            #expect(scratch.isEmpty, "crash point \(crashPoint): the restart removed \(scratch)")
            if result.status == 0 { break }
            crashes += 1
        }
        #expect(crashes >= 4, "the \(operation) was interrupted at each of its I/O calls (\(crashes))")
    }
}
