import Foundation
import Synchronization

/// What a load run measured, and what it was told it wrote (to check again later).
public struct LoadResult: Sendable {
    public var report: LoadReport
    public var ledger: LoadLedger
}

/// Drives the board API with a bounded mixed workload, then checks that every acknowledged write
/// is there and that the shared counter lost no increment.
///
/// ```swift
/// var plan = LoadPlan(servers: ["http://127.0.0.1:8080"], bound: .duration(.seconds(10)))
/// plan.concurrency = 16
/// let result = try await LoadGenerator.run(plan, label: "Loom on SQLite")
/// print(result.report.text)
/// ```
///
/// A run makes ``LoadPlan/boards`` boards with ``LoadPlan/cardsPerBoard`` cards each and one
/// counter card, then starts ``LoadPlan/concurrency`` workers, each making one operation after
/// another until the bound; then it reads back what it wrote, through every server. Callable from
/// any isolation; the workers run as child tasks.
public enum LoadGenerator {
    /// Sets up, runs and checks `plan`; the report is named `label`. `started`, if given, is
    /// called with the boards' IDs once the setup is done and the workers start (a test injects
    /// its faults from then on).
    ///
    /// - Throws: ``LoadError`` when the plan is out of range or the setup fails (a server that
    ///   does not answer, or refuses to make the boards). Failures during the run are counted in
    ///   the report, not thrown.
    public static func run(_ plan: LoadPlan, label: String, started: (@Sendable ([Int64]) -> Void)? = nil) async throws(LoadError) -> LoadResult {
        try plan.validate()
        let client = BoardClient(servers: plan.servers, connectionsPerServer: plan.concurrency, timeout: plan.requestTimeout)
        let result: Result<LoadResult, LoadError>
        do throws(LoadError) {
            let setup = try await Setup.make(plan, client: client)
            started?(setup.ledger.boards)
            let drive = await drive(plan, setup: setup, client: client)
            var ledger = setup.ledger
            var workers = Worker.Totals()
            for worker in drive.workers {
                ledger.merge(worker.ledger)
                workers.add(worker)
            }
            var check: LoadReport.Check
            if let checkServers = plan.checkServers {
                check = await verify(ledger, servers: checkServers, concurrency: plan.concurrency)
            } else {
                check = await verify(ledger, client: client, concurrency: plan.concurrency)
            }
            check.violations = Array((workers.violations + check.violations).prefix(20))
            check.violationCount += workers.violations.count
            let report = LoadReport(
                label: label, servers: plan.servers.count, concurrency: plan.concurrency, seconds: drive.seconds,
                requests: workers.requests, operations: workers.operations, conflicts: workers.conflicts,
                latencies: workers.latencies(), errors: workers.errors, unknownOutcomes: workers.unknown,
                requestsByServer: workers.requestsByServer(plan.servers.count),
                successesByServer: workers.successesByServer(plan.servers.count), check: check, timeline: workers.tenths())
            result = .success(LoadResult(report: report, ledger: ledger))
        } catch {
            result = .failure(error)
        }
        await client.shutdown()
        return try result.get()
    }

    /// Reads back, through every server in `servers`, what `ledger` says was acknowledged: the
    /// counter, every card and every board's list. Callable from any isolation.
    public static func verify(_ ledger: LoadLedger, servers: [String], concurrency: Int = 8) async -> LoadReport.Check {
        let client = BoardClient(servers: servers, connectionsPerServer: max(1, concurrency), timeout: .seconds(60))
        let check = await verify(ledger, client: client, concurrency: max(1, concurrency))
        await client.shutdown()
        return check
    }

    // MARK: The run

    /// Runs the workers until the plan's bound; returns them with what they counted.
    private static func drive(_ plan: LoadPlan, setup: Setup, client: BoardClient) async -> (workers: [Worker], seconds: Double) {
        let shared = Shared(plan: plan, setup: setup, client: client)
        let start = ContinuousClock.now
        let workers = await withTaskGroup(of: Worker.self) { group in
            for index in 0..<plan.concurrency {
                let worker = Worker(index: index, plan: plan, owned: setup.owned(by: index, of: plan.concurrency))
                group.addTask {
                    var worker = worker
                    await worker.run(shared)
                    return worker
                }
            }
            var workers: [Worker] = []
            for await worker in group { workers.append(worker) }
            return workers
        }
        let elapsed = ContinuousClock.now - start
        return (workers, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    // MARK: The check

    private static func verify(_ ledger: LoadLedger, client: BoardClient, concurrency: Int) async -> LoadReport.Check {
        // Servers that do not serve yet are waited for, a minute at most in all.
        let deadline = ContinuousClock.now + .seconds(60)
        var violations: [String] = []
        var counterValues: [Int] = []
        let servers = client.servers.count
        // The counter, through each server.
        for server in 0..<servers {
            let where_ = servers > 1 ? " by server \(server + 1)" : ""
            guard let reply = try? await readBack(client, "/cards/\(ledger.counter)", to: server, until: deadline), reply.status == 200,
                let counter = reply.decode(CardReply.self)
            else {
                violations.append("The counter (card \(ledger.counter)) could not be read\(where_).")
                continue
            }
            counterValues.append(counter.position)
            let low = ledger.acknowledgedIncrements, high = low + ledger.unknownIncrements
            if counter.position < low {
                violations.append("Lost update: the counter is \(counter.position)\(where_), but \(low) increments were acknowledged.")
            } else if counter.position > high {
                violations.append("The counter is \(counter.position)\(where_), more than the \(low) increments acknowledged and \(ledger.unknownIncrements) of unknown outcome.")
            }
            if counter.revision != counter.position + 1 {
                violations.append("The counter's revision is \(counter.revision)\(where_) after \(counter.position) increments: its ETag did not count each one.")
            }
        }
        // Every acknowledged card, each through one server in turn.
        let cards = ledger.cards.values.sorted { $0.id < $1.id }
        let cardViolations = await withTaskGroup(of: [String].self) { group in
            let lanes = max(1, min(concurrency, cards.count))
            for lane in 0..<lanes {
                group.addTask {
                    var found: [String] = []
                    for index in stride(from: lane, to: cards.count, by: lanes) {
                        let card = cards[index]
                        let server = Int(card.id) % servers
                        let where_ = servers > 1 ? " by server \(server + 1)" : ""
                        guard let reply = try? await readBack(client, "/cards/\(card.id)", to: server, until: deadline) else {
                            found.append("Card \(card.id) could not be read\(where_) (no answer).")
                            continue
                        }
                        guard reply.status == 200, let served = reply.decode(CardReply.self) else {
                            found.append("Card \(card.id), acknowledged, was answered \(reply.status)\(where_).")
                            continue
                        }
                        if served.title != card.title || served.board != card.board {
                            found.append("Card \(card.id) is '\(served.title)' on board \(served.board)\(where_), not '\(card.title)' on board \(card.board) as created.")
                        }
                        if served.details != card.details && !card.possibleDetails.contains(served.details) {
                            found.append("Lost write: card \(card.id)'s details are '\(served.details)'\(where_), not '\(card.details)' as acknowledged.")
                        }
                    }
                    return found
                }
            }
            var all: [String] = []
            for await found in group { all += found }
            return all
        }
        violations += cardViolations
        // Every board's list holds its acknowledged cards, through each server.
        var boardsChecked = 0
        let byBoard = Dictionary(grouping: cards, by: \.board)
        for board in ledger.boards {
            for server in 0..<servers {
                let where_ = servers > 1 ? " by server \(server + 1)" : ""
                guard let reply = try? await readBack(client, "/boards/\(board)/cards", to: server, until: deadline), reply.status == 200,
                    let listed = reply.decode([CardReply].self)
                else {
                    violations.append("Board \(board)'s cards could not be listed\(where_).")
                    continue
                }
                boardsChecked += 1
                let ids = Set(listed.map(\.id))
                let missing = (byBoard[board] ?? []).map(\.id).filter { !ids.contains($0) }
                if !missing.isEmpty {
                    violations.append("Board \(board)'s list\(where_) lacks \(missing.count) acknowledged cards (\(missing.prefix(5).map(String.init).joined(separator: ", "))…).")
                }
            }
        }
        return LoadReport.Check(
            acknowledgedIncrements: ledger.acknowledgedIncrements, unknownIncrements: ledger.unknownIncrements,
            counterValues: counterValues, cardsChecked: cards.count, boardsChecked: boardsChecked,
            violations: Array(violations.prefix(20)), violationCount: violations.count)
    }
}

/// The answer to `GET path` from `server` for the check after a run: a server that cannot answer
/// yet (no answer, or a 5xx: a database coming back) is asked again every 200 ms until `deadline`
/// (one for the whole check), so that the check tells lost data from a server not serving yet.
private func readBack(
    _ client: BoardClient, _ path: String, to server: Int, until deadline: ContinuousClock.Instant
) async throws(BoardClient.TransportFailure) -> BoardClient.Reply {
    while true {
        do throws(BoardClient.TransportFailure) {
            let reply = try await client.send(.GET, path, to: server)
            if reply.status < 500 || ContinuousClock.now >= deadline { return reply }
        } catch {
            if ContinuousClock.now >= deadline { throw error }
        }
        try? await Task.sleep(for: .milliseconds(200))
    }
}

/// What the workers share: the plan, the boards, the cards any of them may read, and the bound.
///
/// Sendable: its mutable parts are a `Mutex` and an `Atomic`.
final class Shared: Sendable {
    let plan: LoadPlan
    let client: BoardClient
    let boards: [Int64]
    let counter: Int64
    /// Every card a server acknowledged, for reads of one card.
    let knownCards: Mutex<[Int64]>
    let operationsStarted = Atomic<Int>(0)
    let deadline: ContinuousClock.Instant?
    /// When the workers started.
    let start = ContinuousClock.now

    init(plan: LoadPlan, setup: Setup, client: BoardClient) {
        self.plan = plan
        self.client = client
        boards = setup.ledger.boards
        counter = setup.ledger.counter
        knownCards = Mutex(setup.ledger.cards.keys.sorted())
        if case .duration(let duration) = plan.bound { deadline = .now + duration } else { deadline = nil }
    }

    /// Whether another operation may start (and counts it when the bound is a number of them).
    func mayStart() -> Bool {
        switch plan.bound {
        case .duration:
            return ContinuousClock.now < deadline!
        case .operations(let count):
            return operationsStarted.wrappingAdd(1, ordering: .relaxed).oldValue < count
        }
    }

    /// A card some server acknowledged, chosen with `random`.
    func someCard(using random: inout LoadRandom) -> Int64 {
        knownCards.withLock { $0[Int(random.next() % UInt64($0.count))] }
    }

    func acknowledge(card: Int64) {
        knownCards.withLock { $0.append(card) }
    }
}

/// The seeded random numbers of one worker (SplitMix64), so that a run can be repeated.
struct LoadRandom: RandomNumberGenerator, Sendable {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
