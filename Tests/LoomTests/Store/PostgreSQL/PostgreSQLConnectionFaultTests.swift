import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import LoomTools
import Synchronization
import Testing

/// Loom's sessions ended by the server (`pg_terminate_backend` from an administrator's
/// connection, ``BackendTerminator``) at random moments of its operations — a save of inserts,
/// updates, deletes and relationship changes, batch inserts, updates and deletes, a fetch,
/// faulting, an inferred migration and a transform stage in chunks — and while it listens for
/// another server's commits, and the server restarted under two servers' saves. The moment is
/// drawn from a seeded generator over the operation's duration measured in a clean run, so a
/// failure names a seed that replays it.
///
/// Every run must end in one of two ways: the operation succeeds and the store holds its whole
/// result, or it throws a `LoomError` (`storeFailure`, or `commitOutcomeUnknown` when the
/// connection went after `COMMIT` was sent) within the timeout and the store holds nothing of
/// it (or all of it, for `commitOutcomeUnknown`; whole committed steps, for a transform stage).
/// Either way no other context was told of a change that did not commit, the history agrees
/// with the rows, `loom verify`'s checks find nothing, and the same container, not reopened,
/// then runs the operation to its result.
///
/// `LOOM_PG_FAULT_RUNS` sets the runs per operation (3 by default: CI), `LOOM_PG_FAULT_SEED` the
/// seed, `LOOM_PG_FAULT_SCENARIOS` the operations (`scripts/postgres-faults` runs them in full).
/// Each test runs on a cluster of its own (``OwnedPostgresCluster``), never the shared server.
@MainActor
@Suite("PostgreSQL connection faults at random moments", .serialized, PostgresServer.required, .ownThreads, .timeLimit(.minutes(30)))
struct PostgreSQLConnectionFaultTests {
    /// The stores' response and connect timeouts: a hang would show as a call longer than this.
    nonisolated static let timeout: Duration = .seconds(3)
    nonisolated static let runs = ProcessInfo.processInfo.environment["LOOM_PG_FAULT_RUNS"].flatMap(Int.init) ?? 3
    nonisolated static let seed = ProcessInfo.processInfo.environment["LOOM_PG_FAULT_SEED"].flatMap(UInt64.init) ?? 41
    /// The name every session of the containers under test carries; the terminations select it.
    nonisolated static let victim = "loom-fault"

    @Test("Sessions ended at a random moment of each operation: a LoomError or the whole result, nothing half-committed, and the same container then succeeds")
    func sessionsEndedDuringOperations() async throws {
        let cluster = try OwnedPostgresCluster()
        let admin = BackendTerminator(try cluster.configuration(timeout: Self.timeout))
        defer { admin.close() }
        var total = (runs: 0, threw: 0, ended: 0, violations: 0)
        for (s, scenario) in PGFaultScenario.all.enumerated() {
            let start = ContinuousClock.now
            let clean = try await run(scenario, number: 0, cluster: cluster, admin: admin, fault: nil, expected: nil)
            #expect(clean.problems.isEmpty, "\(scenario) clean run: \(clean.problems)")
            if scenario.tellsOtherContexts { #expect(clean.told > 0, "\(scenario): the observer was not told of a committed change") }
            var threw = 0, ended = 0, violations = 0
            for n in 1...max(1, Self.runs) {
                var random = SeededGenerator(seed: Self.seed &+ UInt64(s) &* 1_000_003 &+ UInt64(n))
                // From before the operation begins to a little past its clean duration.
                let delay = clean.took * Double.random(in: 0..<1.2, using: &random)
                let outcome: PGFaultOutcome
                do {
                    outcome = try await run(scenario, number: n, cluster: cluster, admin: admin, fault: delay, expected: clean.after)
                } catch {
                    outcome = PGFaultOutcome(problems: ["the run itself failed: \(error)"])
                }
                threw += outcome.threw ? 1 : 0
                ended += outcome.ended
                violations += outcome.problems.isEmpty ? 0 : 1
                #expect(outcome.problems.isEmpty, "\(scenario), seed \(Self.seed) run \(n) (sessions ended after \(delay)): \(outcome.problems.joined(separator: "; "))")
            }
            let runs = max(1, Self.runs)
            total = (total.runs + runs, total.threw + threw, total.ended + ended, total.violations + violations)
            print("postgres faults \(scenario): \(runs) runs, \(ended) sessions ended, \(threw) threw, \(runs - threw) succeeded, \(violations) violations (clean run \(clean.took)) in \(ContinuousClock.now - start)")
        }
        print("postgres faults, operations: \(PGFaultScenario.all.count) operations × \(max(1, Self.runs)) runs = \(total.runs) runs, \(total.ended) sessions ended, \(total.threw) threw, \(total.violations) violations")
    }

    /// One run on a new store seeded in a schema of its own, with the container's sessions ended
    /// `fault` after the operation begins (`nil`: the clean run, which finds `expected`).
    func run(_ scenario: PGFaultScenario, number: Int, cluster: OwnedPostgresCluster, admin: BackendTerminator, fault: Duration?, expected: [String]?) async throws -> PGFaultOutcome {
        var configuration = try cluster.configuration(timeout: Self.timeout)
        configuration.schemaName = "fault_\(scenario.tag)_\(number)"
        defer {
            _ = try? admin.query("DROP SCHEMA IF EXISTS \"\(configuration.schemaName)\" CASCADE")
            _ = try? admin.query("DROP SCHEMA IF EXISTS \"\(configuration.schemaName)_migration_source\" CASCADE")
        }
        var seeding = configuration
        seeding.applicationName = "loom-seed"
        try await scenario.seed(seeding)
        var outcome = PGFaultOutcome()
        let before = try await scenario.contents(configuration, admin)
        configuration.applicationName = Self.victim
        let attempt = try await scenario.begin(configuration)
        let termination = ScheduledTermination(admin, applicationName: Self.victim)
        if let fault { termination.start(after: [fault]) }
        let start = ContinuousClock.now
        var failure: (any Error)?
        do { try await attempt.operation() } catch { failure = error }
        outcome.took = ContinuousClock.now - start
        await termination.finish()
        outcome.ended = termination.ended
        if let problem = termination.failure { outcome.problems.append("the termination failed: \(problem)") }
        outcome.told = await attempt.told()
        let state = try await scenario.contents(configuration, admin)
        if outcome.took > Self.timeout * 2 + .seconds(2) { outcome.problems.append("the operation took \(outcome.took), past the timeouts") }
        var retries = true
        if let failure {
            outcome.threw = true
            let code = (failure as? LoomError)?.code
            if code == nil { outcome.problems.append("threw something other than a LoomError: \(String(reflecting: failure))") }
            if fault == nil { outcome.problems.append("threw with no session ended: \(failure)") }
            let committed = expected != nil && state == expected
            if code == .commitOutcomeUnknown && committed {
                // Committed after all: the caller learns it by reading, and drops its changes.
                attempt.discard()
                retries = false
            } else {
                if outcome.told > 0 { outcome.problems.append("another context was told of a change that did not commit") }
                switch scenario.afterFailure {
                case .unchanged where state != before:
                    outcome.problems.append("the store changed although the operation threw \(code?.rawValue ?? "?"): \(FaultInjectionTests.difference(before, state))")
                case .unchangedOrWhole where state != before && !committed:
                    outcome.problems.append("the operation threw and left part of its result: \(FaultInjectionTests.difference(before, state))")
                default:
                    break
                }
            }
        } else {
            retries = false
            if let expected, state != expected {
                outcome.problems.append("the operation succeeded but the store does not hold its result: \(FaultInjectionTests.difference(expected, state))")
            }
        }
        if retries {
            // The same container, not reopened: the store connects again by itself.
            do { try await attempt.retry() } catch { outcome.problems.append("the retry on the same container failed: \(error)") }
        }
        outcome.after = try await scenario.contents(configuration, admin)
        if let expected, outcome.after != expected {
            outcome.problems.append("in the end the store does not hold the operation's result: \(FaultInjectionTests.difference(expected, outcome.after))")
        }
        let closing = ContinuousClock.now
        do { try await attempt.end() } catch { outcome.problems.append("closing failed: \(error)") }
        if ContinuousClock.now - closing > Self.timeout * 2 + .seconds(2) { outcome.problems.append("closing took \(ContinuousClock.now - closing)") }
        outcome.problems += try Self.verify(cluster, configuration.schemaName)
        return outcome
    }

    /// What `loom verify` finds in the store in `schema`, as problems.
    static func verify(_ cluster: OwnedPostgresCluster, _ schema: String) throws -> [String] {
        let report = try StoreVerifier(location: cluster.url + "&schema=" + schema).verify()
        return report.findings.map { "verify: \($0)" }
    }

    @Test("The listener's sessions ended again and again while another server commits: every commit arrives, once, in order, and the listener's container saves")
    func listenerCatchesUp() async throws {
        let cluster = try OwnedPostgresCluster()
        let admin = BackendTerminator(try cluster.configuration(timeout: Self.timeout))
        defer { admin.close() }
        let rounds = max(1, Self.runs)
        var total = (commits: 0, ended: 0, violations: 0)
        for round in 0..<rounds {
            var random = SeededGenerator(seed: Self.seed &+ 7_000_000 &+ UInt64(round))
            var configuration = try cluster.configuration(timeout: Self.timeout)
            configuration.schemaName = "listen_\(round)"
            configuration.listenerReconnection.initialDelay = .milliseconds(20)
            var listening = configuration, other = configuration
            listening.applicationName = "loom-listening"
            other.applicationName = "loom-other"
            let schema = try Schema(Book.self)
            let container = PersistentContainer(store: try PostgreSQLStore(configuration: listening, schema: schema))
            let committer = PersistentContainer(store: try PostgreSQLStore(configuration: other, schema: schema))
            let heard = RemoteTransactions(container.remoteChanges())
            try await waitForSessions(admin, "loom-listening")
            let commits = 20
            // Four terminations over the burst (about 10 ms a commit).
            let delays = (0..<4).map { _ in Duration.milliseconds(Int.random(in: 0..<(commits * 12), using: &random)) }.sorted()
            let termination = ScheduledTermination(admin, applicationName: "loom-listening")
            termination.start(after: delays)
            var committed: [Int64] = []
            for i in 0..<commits {
                let id = try await committer.save { context in
                    context.transactionAuthor = "other"
                    let book = Book(isbn: "r\(round)-\(i)", title: "Remote \(i)")
                    context.insert(book)
                    return book.objectID
                }
                committed.append(id.primaryKey)
                try await Task.sleep(for: .milliseconds(Int.random(in: 0..<8, using: &random)))
            }
            await termination.finish()
            let found = await heard.wait(for: commits, then: .milliseconds(1_500))
            var problems: [String] = []
            if let failure = termination.failure { problems.append("the termination failed: \(failure)") }
            let keys = found.flatMap { $0.changes.map(\.objectID.primaryKey) }
            if keys != committed { problems.append("heard \(keys.count) inserts \(keys), expected \(committed) (each once, in commit order)") }
            if found.contains(where: { $0.author != "other" }) { problems.append("heard a transaction not the other server's") }
            let numbers = found.map(\.token.transactionNumber)
            if numbers != numbers.sorted() || Set(numbers).count != numbers.count { problems.append("transactions out of order or twice: \(numbers)") }
            if heard.historyWasLost { problems.append("a history loss was reported") }
            if let failure = container.coordinator.remoteChangesFailure { problems.append("the listener gave up: \(failure)") }
            do {
                try await container.save { context in context.insert(Book(isbn: "l\(round)", title: "Local after")) }
            } catch {
                problems.append("the listening container could not save afterwards: \(error)")
            }
            try await committer.close()
            try await container.close()
            problems += try Self.verify(cluster, configuration.schemaName)
            #expect(problems.isEmpty, "listener, seed \(Self.seed) round \(round) (terminations at \(delays)): \(problems.joined(separator: "; "))")
            total = (total.commits + commits, total.ended + termination.ended, total.violations + (problems.isEmpty ? 0 : 1))
        }
        print("postgres faults, listening: \(rounds) rounds × 4 terminations, \(total.commits) remote commits, \(total.ended) sessions ended, \(total.violations) violations")
    }

    @Test("The server restarted during a stream of saves from two containers: each save commits once, every other container's commit is heard once, and nothing else")
    func serverRestartDuringSaves() async throws {
        let cluster = try OwnedPostgresCluster()
        let admin = BackendTerminator(try cluster.configuration(timeout: Self.timeout))
        defer { admin.close() }
        let rounds = max(1, Self.runs / 3)
        var total = (saves: 0, failures: 0, violations: 0)
        for round in 0..<rounds {
            var random = SeededGenerator(seed: Self.seed &+ 9_000_000 &+ UInt64(round))
            var configuration = try cluster.configuration(timeout: Self.timeout)
            configuration.schemaName = "restart_\(round)"
            configuration.listenerReconnection.initialDelay = .milliseconds(50)
            let schema = try Schema(Book.self)
            let containers = try ["a", "b"].map { name in
                var named = configuration
                named.applicationName = "loom-restart-\(name)"
                return PersistentContainer(store: try PostgreSQLStore(configuration: named, schema: schema))
            }
            let heard = containers.map { RemoteTransactions($0.remoteChanges()) }
            for name in ["a", "b"] { try await waitForSessions(admin, "loom-restart-\(name)") }
            let saves = 30
            let down = Duration.milliseconds(Int.random(in: 50..<400, using: &random))
            let away = Duration.milliseconds(Int.random(in: 100..<800, using: &random))
            async let first = SaveStream.run(containers[0], author: "a", prefix: "a\(round)", count: saves)
            async let second = SaveStream.run(containers[1], author: "b", prefix: "b\(round)", count: saves)
            try await Task.sleep(for: down)
            try cluster.halt()
            try await Task.sleep(for: away)
            try cluster.resume()
            let streams = try await [first, second]
            var problems = streams.flatMap(\.problems)
            let failures = streams.map(\.failures).reduce(0, +)
            for (i, listener) in heard.enumerated() {
                let other = streams[1 - i]
                let found = await listener.wait(for: other.keys.count, then: .milliseconds(1_500))
                let keys = found.flatMap { $0.changes.map(\.objectID.primaryKey) }
                if Set(keys) != Set(other.keys) || keys.count != other.keys.count {
                    problems.append("container \(i) heard \(keys.count) of the other's inserts (\(other.keys.count) committed): missing \(Set(other.keys).subtracting(keys).sorted()), unexpected or twice \(keys.count - Set(keys).count)")
                }
                if let failure = containers[i].coordinator.remoteChangesFailure { problems.append("container \(i)'s listener gave up: \(failure)") }
            }
            let books = try await containers[0].performBackgroundTask { context in try context.fetch(FetchRequest<Book>()).map(\.isbn) }
            if books.count != saves * 2 || Set(books).count != books.count { problems.append("the store holds \(books.count) books (\(Set(books).count) distinct), expected \(saves * 2)") }
            let history = try admin.query("SELECT count(*)::text FROM \"\(configuration.schemaName)\".loom_history WHERE changes IS NOT NULL").first
            if history != "\(saves * 2)" { problems.append("the history holds \(history ?? "?") transactions, expected \(saves * 2)") }
            for container in containers { try await container.close() }
            problems += try Self.verify(cluster, configuration.schemaName)
            #expect(problems.isEmpty, "restart, seed \(Self.seed) round \(round) (down after \(down) for \(away)): \(problems.joined(separator: "; "))")
            total = (total.saves + saves * 2, total.failures + failures, total.violations + (problems.isEmpty ? 0 : 1))
        }
        print("postgres faults, restart: \(rounds) restarts, \(total.saves) saves, \(total.failures) failed calls retried, \(total.violations) violations")
    }

    @Test("The timeouts and the session name reach the server's startup parameters")
    func startupParameters() throws {
        var configuration = try PostgreSQLStore.Configuration(url: "postgres://app@localhost:5432/db")
        #expect(configuration.connectTimeout == .seconds(10))
        #expect(configuration.statementTimeout == nil)
        #expect(configuration.listenerReconnection.maximumAttempts == nil)
        func parameters() throws -> [String: String] {
            Dictionary(try configuration.connectionConfiguration.options.additionalStartupParameters, uniquingKeysWith: { $1 })
        }
        #expect(try parameters()["application_name"] == "loom")
        #expect(try parameters()["statement_timeout"] == nil)
        configuration.applicationName = "board-server-2"
        configuration.statementTimeout = .microseconds(1_500)
        #expect(try parameters()["application_name"] == "board-server-2")
        #expect(try parameters()["statement_timeout"] == "2")      // whole milliseconds, rounded up
        configuration.statementTimeout = .seconds(90)
        #expect(try parameters()["statement_timeout"] == "90000")
    }

    @Test("A statement past statementTimeout is cancelled by the server: storeFailure with SQLSTATE 57014 within it, the connection kept, and the next read works")
    func statementTimeout() async throws {
        let cluster = try OwnedPostgresCluster()
        let admin = BackendTerminator(try cluster.configuration(timeout: Self.timeout))
        defer { admin.close() }
        var configuration = try cluster.configuration(timeout: .seconds(20))
        configuration.statementTimeout = .milliseconds(300)
        configuration.maximumReaderCount = 1
        configuration.applicationName = "loom-statement-timeout"
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)))
        try await container.save { context in context.insert(Book(isbn: "1", title: "Locked")) }
        let context = container.newBackgroundContext()
        #expect(try context.performAndWait { try $0.count(for: FetchRequest<Book>()) } == 1)
        let sessions = try admin.sessions(applicationName: "loom-statement-timeout")
        let table = try #require(try admin.query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_name NOT LIKE 'loom%'").first)
        _ = try admin.query("BEGIN")
        _ = try admin.query("LOCK TABLE public.\"\(table)\" IN ACCESS EXCLUSIVE MODE")
        let start = ContinuousClock.now
        let failure = context.performAndWait { context -> LoomError? in
            do throws(LoomError) { _ = try context.fetch(FetchRequest<Book>()) } catch { return error }
            return nil
        }
        let took = ContinuousClock.now - start
        _ = try admin.query("ROLLBACK")
        #expect(failure?.code == .storeFailure)
        #expect(failure?.storeCode?.sqlState == "57014", "\(String(describing: failure))")
        #expect(took < .seconds(3), "the fetch took \(took)")
        #expect(try context.performAndWait { try $0.fetch(FetchRequest<Book>()).map(\.title) } == ["Locked"])
        #expect(try admin.sessions(applicationName: "loom-statement-timeout") == sessions)   // no connection replaced
        try await container.close()
    }

    @Test("A listener past maximumAttempts gives up: remoteChangesFailure says why and the streams end; the store itself works again once the server is back")
    func listenerGivesUp() async throws {
        let cluster = try OwnedPostgresCluster()
        let admin = BackendTerminator(try cluster.configuration(timeout: Self.timeout))
        defer { admin.close() }
        var configuration = try cluster.configuration(timeout: Self.timeout)
        configuration.applicationName = "loom-gives-up"
        configuration.listenerReconnection.initialDelay = .milliseconds(50)
        configuration.listenerReconnection.maximumDelay = .milliseconds(100)
        configuration.listenerReconnection.maximumAttempts = 3
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)))
        let stream = container.remoteChanges()
        try await waitForSessions(admin, "loom-gives-up")
        try cluster.halt()
        let deadline = ContinuousClock.now + .seconds(10)
        while container.coordinator.remoteChangesFailure == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let failure = try #require(container.coordinator.remoteChangesFailure)
        #expect(failure.code == .storeFailure)
        #expect(failure.message.contains("3 attempts"), "\(failure.message)")
        var events = 0
        for await _ in stream { events += 1 }          // ended
        #expect(events == 0)
        try cluster.resume()
        try await container.save { context in context.insert(Book(isbn: "1", title: "After")) }
        try await container.close()
    }

    /// Waits until the server has a session named `name` (a container's listener is listening).
    func waitForSessions(_ admin: BackendTerminator, _ name: String) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try admin.sessions(applicationName: name) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// What one run found.
struct PGFaultOutcome {
    var took: Duration = .zero
    var threw = false
    var ended = 0
    var told = 0
    var after: [String] = []
    var problems: [String] = []
}

/// Saves one new book at a time, each retried until it commits (the server may be away): a
/// failed save must be a `storeFailure` or `commitOutcomeUnknown` within the timeout; a commit
/// whose outcome was unknown is looked up before it is tried again.
enum SaveStream {
    struct Result: Sendable {
        var keys: [Int64] = []
        var failures = 0
        var problems: [String] = []
    }

    static func run(_ container: PersistentContainer, author: String, prefix: String, count: Int) async throws -> Result {
        let context = container.newBackgroundContext()
        var result = Result()
        for i in 0..<count {
            let isbn = "\(prefix)-\(i)"
            let key = context.performAndWait { context in
                context.transactionAuthor = author
                let book = Book(isbn: isbn, title: "Saved by \(author)")
                context.insert(book)
                return book.objectID.primaryKey
            }
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                let start = ContinuousClock.now
                let error: LoomError? = context.performAndWait { context in
                    do throws(LoomError) { try context.save() } catch { return error }
                    return nil
                }
                guard let error else { break }
                result.failures += 1
                let took = ContinuousClock.now - start
                if took > PostgreSQLConnectionFaultTests.timeout * 2 + .seconds(2) { result.problems.append("a failed save of \(isbn) took \(took)") }
                if error.code != .storeFailure && error.code != .commitOutcomeUnknown { result.problems.append("save of \(isbn): \(error.code.rawValue): \(error)") }
                if ContinuousClock.now > deadline {
                    result.problems.append("\(isbn) was not saved within 30 s: \(error)")
                    return result
                }
                if error.code == .commitOutcomeUnknown {
                    let saved = try? await container.performBackgroundTask { context in try context.count(for: FetchRequest<Book>(predicate: #Predicate<Book> { $0.isbn == isbn })) }
                    if saved == 1 {
                        context.performAndWait { $0.rollback() }
                        break
                    }
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            result.keys.append(key)
            // Spread over about a second, so that the restart falls among the saves.
            try await Task.sleep(for: .milliseconds(25))
        }
        return result
    }
}

/// The transactions a ``PersistentStoreCoordinator/remoteChanges()`` stream delivers, collected
/// as they come.
final class RemoteTransactions: Sendable {
    private final class Found: Sendable {
        let value = Mutex<(transactions: [HistoryTransaction], lost: Bool)>(([], false))
    }

    private let found: Found
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<RemoteChangeEvent>) {
        let found = Found()
        self.found = found
        task = Task {
            for await event in stream {
                found.value.withLock {
                    $0.transactions += event.transactions
                    $0.lost = $0.lost || event.historyWasLost
                }
            }
        }
    }

    deinit { task.cancel() }

    var historyWasLost: Bool { found.value.withLock { $0.lost } }

    /// The transactions once `count` came (or 20 seconds passed), and `settle` more passed, so
    /// that one delivered twice shows.
    func wait(for count: Int, then settle: Duration) async -> [HistoryTransaction] {
        let deadline = ContinuousClock.now + .seconds(20)
        while found.value.withLock({ $0.transactions.count }) < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        try? await Task.sleep(for: settle)
        return found.value.withLock { $0.transactions }
    }
}
