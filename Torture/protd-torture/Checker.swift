import DataProtection
import Foundation
import ProtectionTestSupport

/// The invariants after a restart, checked against the workers' models,
/// which then take what the daemon shows as their new starting point.
struct Checker {
    let round: Int
    let daemon: DaemonProcess
    let passcode: String
    var failures: [Failure] = []
    var checkedNames = 0

    init(round: Int, daemon: DaemonProcess, passcode: String) {
        self.round = round
        self.daemon = daemon
        self.passcode = passcode
    }

    private mutating func fail(_ kind: Failure.Kind, _ detail: String) {
        failures.append(Failure(round: round, kind: kind, detail: detail))
    }

    mutating func check(team: inout [Worker], races: RaceBoard) async {
        // (3) No temporary file survives the restart (checked before any request).
        // A directory that cannot be found or listed fails the check: it would hide what is left.
        do {
            let scratch = try daemon.namespaceDirectory() + "/tmp"
            let left = FileManager.default.fileExists(atPath: scratch)
                ? try FileManager.default.contentsOfDirectory(atPath: scratch) : []
            if !left.isEmpty { fail(.temporaryLeft, "\(left.count) in \(scratch): \(left.prefix(3).joined(separator: ", "))") }
        } catch {
            fail(.temporaryLeft, "the namespace's tmp/ could not be listed: \(error)")
        }

        let client: DataProtectionClient
        do {
            client = try await DataProtectionClient.connect(socketPath: daemon.socketPath)
            try await client.unlock(passcode: passcode)
        } catch {
            fail(.restart, "connect and unlock after restart: \(error)")
            return
        }
        await examine(client, team: &team, races: races)
        await client.close()
    }

    private mutating func examine(_ client: DataProtectionClient, team: inout [Worker], races: RaceBoard) async {
        // (1) Every listed name can be stat'ed, opened and read in full.
        var contents: [String: (data: [UInt8], protection: ProtectionClass)] = [:]
        let listed: [FileAttributes]
        do {
            listed = try await client.list()
        } catch {
            fail(.listedUnreadable, "list: \(error)")
            return
        }
        for entry in listed {
            checkedNames += 1
            let file = client.file(entry.name)
            do {
                let attributes = try await file.attributes
                let handle = try await file.open(.existing)
                await handle.close()
                let data = try await file.read()
                if UInt64(data.count) != attributes.size {
                    fail(.listedUnreadable, "\(entry.name): stat says \(attributes.size) bytes, read \(data.count)")
                }
                contents[entry.name] = (data, attributes.protection)
            } catch {
                fail(.listedUnreadable, "\(entry.name) (\(entry.protection), \(entry.size) bytes): \(error)")
                contents[entry.name] = ([], entry.protection)
            }
        }
        var known = Set<String>()

        for w in team.indices {
            // (2) and (5): whole-file names show an acknowledged or in-flight state.
            for f in team[w].whole.indices {
                let model = team[w].whole[f]
                known.insert(model.name)
                let candidates = model.candidates
                var observed: WholeState?
                if let seen = contents[model.name] {
                    guard let version = VersionContent.version(of: seen.data, name: model.name) else {
                        fail(.tornOrMixed, "\(model.name): \(seen.data.count) bytes, \(headerOf(seen.data)); expected one of \(describe(candidates))")
                        try? await client.file(model.name).delete()
                        team[w].whole[f].acknowledged = nil
                        team[w].whole[f].inFlight = .none
                        continue
                    }
                    observed = WholeState(version: version, protection: seen.protection)
                }
                if !candidates.contains(observed) {
                    if observed == nil {
                        fail(.acknowledgedLost, "\(model.name) absent; expected one of \(describe(candidates))")
                    } else if candidates.allSatisfy({ $0 == nil }) {
                        fail(.deletedReappeared, "\(model.name) shows \(observed!) after its delete")
                    } else if candidates.contains(where: { $0?.version == observed?.version }) {
                        fail(.wrongClass, "\(model.name) shows \(observed!); expected one of \(describe(candidates))")
                    } else {
                        fail(.acknowledgedLost, "\(model.name) shows \(observed!); expected one of \(describe(candidates))")
                    }
                }
                team[w].whole[f].acknowledged = observed
                team[w].whole[f].inFlight = .none
            }
            // (4) Handle names keep what was synced; only bytes written since may differ.
            for h in team[w].handled.indices {
                let model = team[w].handled[h]
                known.insert(model.name)
                guard let seen = contents[model.name]?.data else {
                    if model.exists { fail(.acknowledgedLost, "\(model.name): created through open, now absent") }
                    team[w].handled[h] = HandleFile(name: model.name)
                    continue
                }
                if !model.exists && !model.createInFlight {
                    fail(.unknownName, "\(model.name) present, never created")
                }
                if seen.count < model.synced.count || seen.count > max(model.maximumSize, model.synced.count) {
                    fail(.syncedDataLost, "\(model.name): \(seen.count) bytes; synced \(model.synced.count), at most \(model.maximumSize)")
                }
                for i in 0..<min(seen.count, model.synced.count) where seen[i] != model.synced[i] {
                    if !model.dirty.contains(where: { $0.range.contains(i) }) {
                        fail(.syncedDataLost, "\(model.name): byte \(i) is \(seen[i]), synced \(model.synced[i]), no write since covers it")
                        break
                    }
                }
                team[w].handled[h].exists = true
                team[w].handled[h].createInFlight = false
                team[w].handled[h].synced = seen
                team[w].handled[h].current = seen
                team[w].handled[h].dirty = []
                team[w].handled[h].maximumSize = seen.count
            }
        }

        // Racing creates: one acknowledged create at most; present only when one was made.
        for (name, race) in await races.take() {
            known.insert(name)
            let present = contents[name] != nil
            if present, let data = contents[name]?.data, !data.isEmpty {
                fail(.tornOrMixed, "\(name): created empty, shows \(data.count) bytes")
            }
            if !present && race.winners > 0 { fail(.acknowledgedLost, "\(name): create acknowledged, now absent") }
            if present && race.winners == 0 && race.inFlight == 0 { fail(.unknownName, "\(name) present, every create refused") }
            if present { try? await client.file(name).delete() }
        }

        for name in contents.keys where !known.contains(name) {
            fail(.unknownName, "\(name) listed")
            try? await client.file(name).delete()
        }
    }

    private func describe(_ candidates: [WholeState?]) -> String {
        candidates.map { $0.map(\.description) ?? "absent" }.joined(separator: " or ")
    }

    private func headerOf(_ data: [UInt8]) -> String {
        let line = data.prefix(80).prefix { $0 != 0x0A }
        return "starts \"" + String(decoding: line, as: UTF8.self) + "\""
    }
}
