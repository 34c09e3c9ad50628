import DataProtection

/// What became of one request.
enum Outcome {
    /// The daemon answered that it took effect.
    case acknowledged
    /// The daemon answered that it did not (locked, not found, exists...).
    case rejected
    /// No answer: the kill cut it short, so it may or may not have taken effect.
    case cut
}

/// An error the daemon answered that the run does not expect (`ioFailure`,
/// `internalError`...), not a definite refusal nor the connection's loss:
/// a failure of its own, and the request's effect is unknown, as if cut.
private func unexpected(_ error: DataProtectionError) -> Bool {
    !error.isDefinite && error.code != .daemonUnavailable
}

extension DataProtectionError {
    /// Whether the daemon's answer says the request had no effect.
    var isDefinite: Bool {
        switch code {
        case .protectedDataUnavailable, .notFound, .alreadyExists, .handleClosed, .fileChanged, .quotaExceeded,
             .tooManyHandles, .invalidArgument, .permissionDenied: true
        default: false
        }
    }
}

/// Operations counted by kind and outcome.
struct Counts: Sendable {
    static let kinds = ["create", "write", "class change", "delete", "read", "handle open", "handle write",
                        "handle sync", "handle read", "racing create", "lock", "unlock"]
    var table: [String: [Int]] = [:]

    mutating func add(_ kind: String, _ outcome: Outcome) {
        var row = table[kind] ?? [0, 0, 0]
        switch outcome {
        case .acknowledged: row[0] += 1
        case .rejected: row[1] += 1
        case .cut: row[2] += 1
        }
        table[kind] = row
    }

    mutating func merge(_ other: Counts) {
        for (kind, row) in other.table {
            table[kind] = zip(table[kind] ?? [0, 0, 0], row).map { $0 + $1 }
        }
    }
}

/// An invariant that did not hold.
struct Failure: Sendable, CustomStringConvertible {
    enum Kind: String, CaseIterable, Sendable {
        case listedUnreadable = "listed name not stat-able, openable or readable"
        case tornOrMixed = "content not one whole version"
        case acknowledgedLost = "acknowledged write or create lost"
        case wrongClass = "class not an acknowledged or in-flight one"
        case temporaryLeft = "temporary files left in tmp/"
        case syncedDataLost = "synced handle data lost"
        case deletedReappeared = "deleted name present"
        case unknownName = "name never created"
        case duplicateCreate = "two creates of one name acknowledged"
        case live = "wrong answer while running"
        case restart = "daemon did not restart"
    }
    var round: Int
    var kind: Kind
    var detail: String
    var description: String { "round \(round): \(kind.rawValue): \(detail)" }
}

/// The names raced for with `open(.create)` by every worker this round.
actor RaceBoard {
    var names: [String: RaceName] = [:]
    func begin(_ name: String) { names[name, default: RaceName()].inFlight += 1 }
    /// Returns how many creates of the name were acknowledged, this one included.
    func end(_ name: String, _ outcome: Outcome) -> Int {
        if outcome != .cut { names[name, default: RaceName()].inFlight -= 1 }
        if outcome == .acknowledged { names[name, default: RaceName()].winners += 1 }
        return names[name]?.winners ?? 0
    }
    func take() -> [String: RaceName] {
        defer { names = [:] }
        return names
    }
}

/// One client connection doing random operations on names only it writes,
/// plus racing creates of shared names, until the kill cuts a request short.
struct Worker: Sendable {
    let index: Int
    var random: SeededRandom
    var whole: [WholeFile]
    var handled: [HandleFile]
    var counts = Counts()
    var failures: [Failure] = []
    /// The round `run` is in, for failures found while running.
    private var round = 0

    init(index: Int, seed: UInt64, wholeNames: Int, handleNames: Int) {
        self.index = index
        random = SeededRandom(seed: seed &+ UInt64(index) &* 0x1000_0000_01b3)
        whole = (0..<wholeNames).map { WholeFile(name: "w\(index)/file\($0)") }
        handled = (0..<handleNames).map { HandleFile(name: "w\(index)/handle\($0)") }
    }

    static let classes: [ProtectionClass] = [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication, .none]

    mutating func randomClass() -> ProtectionClass { Self.classes.randomElement(using: &random)! }

    /// Lengths mostly small, some past the largest single request (streamed).
    mutating func randomLength() -> Int {
        let roll = Int.random(in: 0..<100, using: &random)
        if roll < 70 { return Int.random(in: 0...8192, using: &random) }
        if roll < 96 { return Int.random(in: 8193...262_144, using: &random) }
        return Int.random(in: 262_145...2_500_000, using: &random)
    }

    /// Runs until a request gets no answer (the daemon was killed).
    mutating func run(round: Int, client: DataProtectionClient, races: RaceBoard, raceNames: [String]) async {
        self.round = round
        var handles: [Int: ProtectedFile.Handle] = [:]
        while !Task.isCancelled {
            let roll = Int.random(in: 0..<100, using: &random)
            let going: Bool
            switch roll {
            case 0..<22: going = await write(client)
            case 22..<30: going = await create(client, round: round)
            case 30..<38: going = await changeClass(client)
            case 38..<45: going = await delete(client, round: round)
            case 45..<52: going = await read(client, round: round)
            case 52..<77: going = await handleWrite(client, &handles, round: round)
            case 77..<87: going = await handleSync(client, &handles)
            case 87..<93: going = await handleRead(client, &handles, round: round)
            default: going = await raceCreate(client, races: races, names: raceNames, round: round)
            }
            if !going { break }
        }
    }

    /// Runs `body`, counts it under `kind`; on a cut request returns `.cut`.
    private mutating func attempt(_ kind: String, _ body: () async throws(DataProtectionError) -> Void) async -> (Outcome, DataProtectionError?) {
        do {
            try await body()
            counts.add(kind, .acknowledged)
            return (.acknowledged, nil)
        } catch {
            let outcome: Outcome = error.isDefinite ? .rejected : .cut
            if unexpected(error) { failures.append(Failure(round: round, kind: .live, detail: "\(kind): \(error)")) }
            counts.add(kind, outcome)
            return (outcome, error)
        }
    }

    // MARK: Whole-file names

    private mutating func write(_ client: DataProtectionClient) async -> Bool {
        let i = Int.random(in: 0..<whole.count, using: &random)
        let version = whole[i].nextVersion
        whole[i].nextVersion += 1
        let state = WholeState(version: version, protection: randomClass())
        let data = VersionContent.bytes(name: whole[i].name, version: version, length: randomLength())
        let file = client.file(whole[i].name)
        return await settle(i, outcome: state) { () async throws(DataProtectionError) in
            try await file.write(data, protection: state.protection, durable: true)
        }
    }

    private mutating func create(_ client: DataProtectionClient, round: Int) async -> Bool {
        let i = Int.random(in: 0..<whole.count, using: &random)
        let state = WholeState(version: 0, protection: randomClass())
        let file = client.file(whole[i].name)
        let existed = whole[i].acknowledged != nil
        whole[i].inFlight = .some(existed ? whole[i].acknowledged : state)
        let (outcome, error) = await attempt("create") { () async throws(DataProtectionError) in
            let handle = try await file.open(.create(state.protection))
            await handle.close()
        }
        whole[i].inFlight = .none
        switch outcome {
        case .acknowledged:
            if existed { failures.append(Failure(round: round, kind: .live, detail: "create of existing \(file.name) succeeded")) }
            whole[i].acknowledged = state
        case .rejected:
            if !existed && error?.code == .alreadyExists {
                failures.append(Failure(round: round, kind: .live, detail: "create of absent \(file.name): alreadyExists"))
            }
        case .cut:
            whole[i].inFlight = .some(existed ? whole[i].acknowledged : state)
            return false
        }
        return true
    }

    private mutating func changeClass(_ client: DataProtectionClient) async -> Bool {
        let i = Int.random(in: 0..<whole.count, using: &random)
        guard var state = whole[i].acknowledged else { return true }
        state.protection = randomClass()
        let file = client.file(whole[i].name)
        let target = state.protection
        return await settle(i, outcome: state, kind: "class change") { () async throws(DataProtectionError) in
            try await file.setProtection(target)
        }
    }

    private mutating func delete(_ client: DataProtectionClient, round: Int) async -> Bool {
        let i = Int.random(in: 0..<whole.count, using: &random)
        let existed = whole[i].acknowledged != nil
        let file = client.file(whole[i].name)
        whole[i].inFlight = .some(nil)
        let (outcome, error) = await attempt("delete") { () async throws(DataProtectionError) in try await file.delete() }
        whole[i].inFlight = .none
        switch outcome {
        case .acknowledged:
            if !existed { failures.append(Failure(round: round, kind: .live, detail: "delete of absent \(file.name) succeeded")) }
            whole[i].acknowledged = nil
        case .rejected:
            if existed && error?.code == .notFound {
                failures.append(Failure(round: round, kind: .live, detail: "delete of \(file.name): notFound"))
            }
        case .cut:
            whole[i].inFlight = .some(nil)
            return false
        }
        return true
    }

    /// A whole-file operation whose effect, if any, is `outcome`.
    private mutating func settle(_ i: Int, outcome state: WholeState, kind: String = "write",
                                 _ body: () async throws(DataProtectionError) -> Void) async -> Bool {
        whole[i].inFlight = .some(state)
        let (outcome, _) = await attempt(kind, body)
        whole[i].inFlight = .none
        switch outcome {
        case .acknowledged: whole[i].acknowledged = state
        case .rejected: break
        case .cut:
            whole[i].inFlight = .some(state)
            return false
        }
        return true
    }

    private mutating func read(_ client: DataProtectionClient, round: Int) async -> Bool {
        let i = Int.random(in: 0..<whole.count, using: &random)
        let file = client.file(whole[i].name)
        var data: [UInt8] = []
        let (outcome, error) = await attempt("read") { () async throws(DataProtectionError) in data = try await file.read() }
        let expected = whole[i].acknowledged
        switch outcome {
        case .acknowledged:
            let seen = VersionContent.version(of: data, name: file.name)
            if seen != expected?.version {
                failures.append(Failure(round: round, kind: .live,
                                        detail: "read \(file.name): v\(seen.map(String.init) ?? "?") (\(data.count) bytes), expected \(expected.map(\.description) ?? "absent")"))
            }
        case .rejected:
            if error?.code == .notFound && expected != nil {
                failures.append(Failure(round: round, kind: .live, detail: "read \(file.name): notFound, expected \(expected!)"))
            }
        case .cut:
            // An integrityFailure is among the unexpected answers `attempt` records.
            return false
        }
        return true
    }

    // MARK: Handle names

    /// The open handle on `handled[i]`, opening (and creating) it if needed;
    /// nil when the open did not succeed, with whether to go on.
    private mutating func handle(_ i: Int, _ client: DataProtectionClient,
                                 _ handles: inout [Int: ProtectedFile.Handle]) async -> (ProtectedFile.Handle?, Bool) {
        if let open = handles[i] { return (open, true) }
        let file = client.file(handled[i].name)
        let protection = randomClass()
        let wasCreated = handled[i].exists
        if !wasCreated { handled[i].createInFlight = true }
        var opened: ProtectedFile.Handle?
        let (outcome, _) = await attempt("handle open") { () async throws(DataProtectionError) in
            opened = try await file.open(.openOrCreate(protection))
        }
        switch outcome {
        case .acknowledged:
            handled[i].exists = true
            handled[i].createInFlight = false
            handles[i] = opened
            return (opened, true)
        case .rejected:
            handled[i].createInFlight = false
            return (nil, true)
        case .cut:
            return (nil, false)
        }
    }

    private mutating func handleWrite(_ client: DataProtectionClient, _ handles: inout [Int: ProtectedFile.Handle],
                                      round: Int) async -> Bool {
        let i = Int.random(in: 0..<handled.count, using: &random)
        let (opened, going) = await handle(i, client, &handles)
        guard let handle = opened else { return going }
        let length = Int.random(in: 1...(Int.random(in: 0..<10, using: &random) == 0 ? 300_000 : 16_384), using: &random)
        let size = handled[i].current.count
        let offset = size > 1_000_000 ? Int.random(in: 0...(size - length), using: &random)
                                      : Int.random(in: 0...size, using: &random)
        let data = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
        handled[i].dirty.append(Dirty(range: offset..<(offset + length)))
        handled[i].maximumSize = max(handled[i].maximumSize, offset + length)
        var newSize: UInt64 = 0
        let (outcome, _) = await attempt("handle write") { () async throws(DataProtectionError) in
            newSize = try await handle.write(data, at: UInt64(offset))
        }
        switch outcome {
        case .acknowledged:
            var current = handled[i].current
            if current.count < offset + length { current += [UInt8](repeating: 0, count: offset + length - current.count) }
            current.replaceSubrange(offset..<(offset + length), with: data)
            handled[i].current = current
            if newSize != UInt64(current.count) {
                failures.append(Failure(round: round, kind: .live, detail: "handle write \(handle.name): size \(newSize), expected \(current.count)"))
            }
        case .rejected:
            handled[i].dirty.removeLast()
            await handle.close()
            handles[i] = nil
        case .cut:
            return false
        }
        return true
    }

    private mutating func handleSync(_ client: DataProtectionClient, _ handles: inout [Int: ProtectedFile.Handle]) async -> Bool {
        let i = Int.random(in: 0..<handled.count, using: &random)
        guard let handle = handles[i] else { return true }
        let (outcome, _) = await attempt("handle sync") { () async throws(DataProtectionError) in try await handle.sync() }
        switch outcome {
        case .acknowledged:
            handled[i].synced = handled[i].current
            handled[i].dirty = []
            handled[i].maximumSize = handled[i].current.count
        case .rejected:
            await handle.close()
            handles[i] = nil
        case .cut:
            return false
        }
        return true
    }

    private mutating func handleRead(_ client: DataProtectionClient, _ handles: inout [Int: ProtectedFile.Handle],
                                     round: Int) async -> Bool {
        let i = Int.random(in: 0..<handled.count, using: &random)
        guard let handle = handles[i] else { return true }
        var data: [UInt8] = []
        let expected = handled[i].current
        let (outcome, _) = await attempt("handle read") { () async throws(DataProtectionError) in
            data = try await handle.read(offset: 0, count: expected.count + 1)
        }
        switch outcome {
        case .acknowledged:
            if data != expected {
                let at = zip(data, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(data.count, expected.count)
                failures.append(Failure(round: round, kind: .live,
                                        detail: "handle read \(handle.name): \(data.count) bytes, expected \(expected.count), first difference at \(at)"))
            }
        case .rejected:
            await handle.close()
            handles[i] = nil
        case .cut:
            // An integrityFailure is among the unexpected answers `attempt` records.
            return false
        }
        return true
    }

    // MARK: Racing creates

    private mutating func raceCreate(_ client: DataProtectionClient, races: RaceBoard, names: [String], round: Int) async -> Bool {
        guard let name = names.randomElement(using: &random) else { return true }
        let file = client.file(name)
        let protection = randomClass()
        await races.begin(name)
        let (outcome, _) = await attempt("racing create") { () async throws(DataProtectionError) in
            let handle = try await file.open(.create(protection))
            await handle.close()
        }
        let winners = await races.end(name, outcome)
        if outcome == .acknowledged && winners > 1 {
            failures.append(Failure(round: round, kind: .duplicateCreate, detail: "\(name) created \(winners) times"))
        }
        return outcome != .cut
    }
}

/// Locks (no grace period) and unlocks again and again.
struct LockCycler: Sendable {
    var random: SeededRandom
    var counts = Counts()
    var failures: [Failure] = []
    private var round = 0

    init(random: SeededRandom) { self.random = random }

    mutating func run(round: Int, client: DataProtectionClient, passcode: String) async {
        self.round = round
        while !Task.isCancelled {
            let locked = await step("lock") { () async throws(DataProtectionError) in try await client.lock(grace: .zero) }
            guard locked else { return }
            try? await Task.sleep(for: .milliseconds(Int.random(in: 20...150, using: &random)))
            let unlocked = await step("unlock") { () async throws(DataProtectionError) in try await client.unlock(passcode: passcode) }
            guard unlocked else { return }
            try? await Task.sleep(for: .milliseconds(Int.random(in: 50...300, using: &random)))
        }
    }

    private mutating func step(_ kind: String, _ body: () async throws(DataProtectionError) -> Void) async -> Bool {
        do {
            try await body()
            counts.add(kind, .acknowledged)
            return true
        } catch {
            if unexpected(error) { failures.append(Failure(round: round, kind: .live, detail: "\(kind): \(error)")) }
            counts.add(kind, error.isDefinite ? .rejected : .cut)
            return error.isDefinite
        }
    }
}
