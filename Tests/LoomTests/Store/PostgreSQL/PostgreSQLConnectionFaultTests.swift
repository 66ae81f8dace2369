import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomTesting) import LoomPostgreSQL
import LoomTools
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
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
        // Every statement the container under test sends, timed: a run past the timeouts says
        // after which statement it waited.
        let statements = Mutex<[(at: ContinuousClock.Instant, sql: Substring)]>([])
        configuration.trace = { sql in statements.withLock { $0.append((.now, sql.prefix(60))) } }
        let attempt = try await scenario.begin(configuration)
        let termination = ScheduledTermination(admin, applicationName: Self.victim)
        let start = ContinuousClock.now
        if let fault { termination.start(after: [fault]) }
        var failure: (any Error)?
        do { try await attempt.operation() } catch { failure = error }
        outcome.took = ContinuousClock.now - start
        await termination.finish()
        outcome.ended = termination.ended
        if let problem = termination.failure { outcome.problems.append("the termination failed: \(problem)") }
        outcome.told = await attempt.told()
        let state = try await scenario.contents(configuration, admin)
        if outcome.took > Self.timeout * 2 + .seconds(2) {
            let sent = statements.withLock { $0.filter { $0.at >= start } }
                .map { "+\(($0.at - start) / .seconds(1)) s \($0.sql)" }
            outcome.problems.append("the operation took \(outcome.took), past the timeouts; its statements: \(sent.joined(separator: " | "))")
        }
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
    nonisolated static func verify(_ cluster: OwnedPostgresCluster, _ schema: String) throws -> [String] {
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

    /// The trap of issue 41, in postgres-nio itself: a listener added with `addListener(channel:)`
    /// on a connection already lost is dropped unused and its `NotificationListener.deinit` runs
    /// `preconditionFailure` on an event-loop thread, ending the process. Loom's listener no longer
    /// calls it (see `PostgreSQLListener`); this child process shows the trap is still there, so
    /// that the day postgres-nio removes it this test says so.
    @Test("postgres-nio's addListener on a lost connection ends the process (the trap Loom's listener avoids)")
    func addListenerOnLostConnectionTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            try await PostgreSQLConnectionFaultTests.addListenerOnLostConnection()
        }
        let output = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
        #expect(output.contains("Notification closure had not been used"), "the child ended otherwise: \(output)")
    }

    /// Run in a child process: connects, closes the connection, then adds a listener on it.
    nonisolated static func addListenerOnLostConnection() async throws {
        let configuration = try PostgresServer.configuration()
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1,
            logger: Logger(label: "loom.tests.trap", factory: { _ in SwiftLogNoOpLogHandler() }))
        try await connection.close()
        connection.addListener(channel: "loom_trap") { _, _ in }
        // The dropped listener traps on the event loop meanwhile.
        try await Task.sleep(for: .seconds(5))
    }

    /// The same moment under Loom's listener, in a child process (the trap would end it, not the
    /// test run): the `listenerConnected` hook ends the listener's fresh session and waits for
    /// the client to see it gone, `trapped` times, just before the listener asks to listen — where
    /// it called `addListener(channel:)` before. Then at random moments: the sessions ended in a
    /// tight loop while the listener reconnects every few milliseconds. The process must live, the
    /// listener must not give up, and every commit made meanwhile must arrive once, in order.
    @Test("The listener's session ended just before it asks to LISTEN, again and again: the process lives and every commit still arrives once")
    func listenerSessionEndedAsItListens() async throws {
        // The cluster is the parent's: one the child started would outlive a crashed child and
        // hold its output pipes open, and this test would wait for it instead of failing.
        let cluster = try OwnedPostgresCluster()
        let handOver = Self.trapClusterFile(parent: getpid())
        try Data(cluster.url.utf8).write(to: handOver)
        defer { try? FileManager.default.removeItem(at: handOver) }
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent, \.standardErrorContent]) {
            try await PostgreSQLConnectionFaultTests.listenerTrapScenario()
        }
        Self.report(result)
    }

    /// Prints a scenario's child process's figures (its "postgres faults" lines) and records
    /// what it found wrong when it did not exit 0 (`#expect(processExitsWith:)` has recorded
    /// the exit status itself).
    static func report(_ result: ExitTest.Result?) {
        guard let result else { return }
        let output = String(decoding: result.standardOutputContent, as: UTF8.self)
        print(output.split(separator: "\n").filter { $0.hasPrefix("postgres faults") }.joined(separator: "\n"))
        if case .exitCode(0) = result.exitStatus {} else {
            Issue.record("the child process: \(output) \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    /// Where the parent test leaves its cluster's URL for the child process.
    nonisolated static func trapClusterFile(parent: Int32) -> URL {
        FileManager.default.temporaryDirectory.appending(path: "loom-listener-trap-\(parent)")
    }

    /// Run in a child process by ``listenerSessionEndedAsItListens()``: prints its figures, and
    /// exits 1 with the problems it found on standard error.
    nonisolated static func listenerTrapScenario() async throws {
        let url = try String(contentsOf: trapClusterFile(parent: getppid()), encoding: .utf8)
        var configuration = try PostgreSQLStore.Configuration(url: url)
        configuration.responseTimeout = timeout
        configuration.connectTimeout = timeout
        let admin = BackendTerminator(configuration)
        defer { admin.close() }
        let trapped = 12
        /// How often the hook ran, and how many sessions its terminations ended.
        final class HookRecord: Sendable { let value = Mutex<(calls: Int, ended: Int, failure: String?)>((0, 0, nil)) }
        let hook = HookRecord()
        configuration.schemaName = "listen_trap"
        configuration.listenerReconnection.initialDelay = .milliseconds(1)
        configuration.listenerReconnection.maximumDelay = .milliseconds(4)
        configuration.listenerReconnection.pollInterval = .milliseconds(200)
        var listening = configuration, other = configuration
        listening.applicationName = "loom-trap"
        other.applicationName = "loom-trap-other"
        listening.listenerConnected = {
            let call = hook.value.withLock { $0.calls += 1; return $0.calls }
            guard call <= trapped else { return }
            do {
                let ended = try admin.terminate(applicationName: "loom-trap")
                hook.value.withLock { $0.ended += ended }
                // The server's goodbye read and the channel closed before the listener goes on.
                Thread.sleep(forTimeInterval: 0.1)
            } catch {
                hook.value.withLock { $0.failure = "\(error)" }
            }
        }
        let schema = try Schema(Book.self)
        let committer = PersistentContainer(store: try PostgreSQLStore(configuration: other, schema: schema))
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: listening, schema: schema))
        let heard = RemoteTransactions(container.remoteChanges())
        var committed: [Int64] = []
        func commit(_ name: String) async throws {
            let id = try await committer.save { context in
                context.transactionAuthor = "other"
                let book = Book(isbn: name, title: "Remote \(name)")
                context.insert(book)
                return book.objectID
            }
            committed.append(id.primaryKey)
        }
        var problems: [String] = []
        // Commits made while the listener cannot listen: caught up from the history later.
        let deadline = ContinuousClock.now + .seconds(30)
        var i = 0
        while hook.value.withLock({ $0.calls }) <= trapped, ContinuousClock.now < deadline {
            try await commit("trap-\(i)")
            i += 1
            try await Task.sleep(for: .milliseconds(50))
        }
        let connected = hook.value.withLock { $0.calls }
        if connected <= trapped { problems.append("the listener connected \(connected) times within 30 s") }
        // At random moments: a session ended every millisecond or so for two seconds.
        let termination = ScheduledTermination(admin, applicationName: "loom-trap")
        termination.start(after: (0..<2_000).map { Duration.milliseconds($0) })
        while !termination.isDone {
            try await commit("loop-\(i)")
            i += 1
            try await Task.sleep(for: .milliseconds(20))
        }
        try await commit("last")
        let found = await heard.wait(for: committed.count, then: .milliseconds(1_000))
        let keys = found.flatMap { $0.changes.map(\.objectID.primaryKey) }
        if keys != committed { problems.append("heard \(keys.count) inserts, expected \(committed.count) (each once, in commit order)") }
        if heard.historyWasLost { problems.append("a history loss was reported") }
        if let failure = container.coordinator.remoteChangesFailure { problems.append("the listener gave up: \(failure)") }
        let (calls, endedByHook, failure) = hook.value.withLock { $0 }
        if let failure { problems.append("the hook's termination failed: \(failure)") }
        if let failure = termination.failure { problems.append("the tight loop's termination failed: \(failure)") }
        if endedByHook < trapped { problems.append("the hook ended \(endedByHook) sessions in \(trapped) calls") }
        do {
            try await container.save { context in context.insert(Book(isbn: "local", title: "Local after")) }
        } catch {
            problems.append("the listening container could not save afterwards: \(error)")
        }
        try await committer.close()
        try await container.close()
        problems += try StoreVerifier(location: url + "&schema=" + configuration.schemaName).verify().findings.map { "verify: \($0)" }
        print("postgres faults, listener trap: \(trapped) sessions ended before LISTEN (\(endedByHook) sessions), then \(termination.ended) ended in a tight loop; \(calls) listener connections, \(committed.count) remote commits, \(problems.count) violations")
        if !problems.isEmpty {
            FileHandle.standardError.write(Data(problems.joined(separator: "\n").utf8))
            exit(1)
        }
    }

    /// A save whose `COMMIT` the server made but whose answer never came (the response timeout
    /// passed while a deferred trigger slept: `commitOutcomeUnknown`) was never announced to the
    /// container's contexts; the listener finds its history row, of the container's own origin,
    /// and hands it on once, as another server's. A save that ended the same way but did not
    /// commit (the trigger then raised) is never handed on, and the container's next save, which
    /// takes the same commit number, is merged once, as a local save, not as a remote one.
    @Test("A save that committed though its answer was lost reaches the container's other contexts once; one that did not commit never does")
    func unacknowledgedCommitReachesOtherContexts() async throws {
        let cluster = try OwnedPostgresCluster()
        var configuration = try cluster.configuration(timeout: .seconds(1))
        configuration.schemaName = "unknown_commit"
        configuration.applicationName = "loom-unknown"
        configuration.listenerReconnection.pollInterval = .milliseconds(100)
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)))
        // The server sleeps past the response timeout inside the commit of a book titled
        // "slow" (and then commits), or "slow, refused" (and then refuses it).
        try cluster.sql("""
            CREATE FUNCTION unknown_commit.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                IF NEW.title LIKE 'slow%' THEN PERFORM pg_sleep(2); END IF;
                IF NEW.title = 'slow, refused' THEN RAISE EXCEPTION 'refused after the timeout'; END IF;
                RETURN NULL; END $$;
            CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON unknown_commit."Book" DEFERRABLE INITIALLY DEFERRED
                FOR EACH ROW EXECUTE FUNCTION unknown_commit.slow_commit();
            """)
        let heard = RemoteTransactions(container.remoteChanges())
        final class Inserted: Sendable { let value = Mutex<[AnyObjectID]>([]) }
        let inserted = Inserted()
        let observer = container.newBackgroundContext(name: "observer")
        try await observer.perform { context in
            context.automaticallyMergesChanges = true
            context.addObserver(for: .objectsDidChange) { event in
                if case .objectsDidChange(let changes) = event { inserted.value.withLock { $0 += changes.inserted } }
            }
            _ = try context.fetch(FetchRequest<Book>())
        }
        func save(_ isbn: String, _ title: String) async -> (key: AnyObjectID, error: LoomError?) {
            let context = container.newBackgroundContext()
            return await context.perform { context in
                let book = Book(isbn: isbn, title: title)
                context.insert(book)
                do throws(LoomError) { try context.save() } catch { return (book.anyObjectID, error) }
                return (book.anyObjectID, nil)
            }
        }
        func observed() async -> [AnyObjectID] {
            await observer.perform { context in context.processPendingChanges() }
            return inserted.value.withLock { $0 }
        }
        /// Waits until the server ended the transaction the client gave up on (it sleeps on).
        func serverDone() async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while try cluster.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'loom-unknown' AND state = 'active'") != ["0"],
                  ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        }
        let committed = await save("1", "slow")
        #expect(committed.error?.code == .commitOutcomeUnknown, "\(String(describing: committed.error))")
        try await serverDone()
        let refused = await save("2", "slow, refused")
        #expect(refused.error?.code == .commitOutcomeUnknown, "\(String(describing: refused.error))")
        try await serverDone()
        let after = await save("3", "After")
        #expect(after.error == nil)
        let found = await heard.wait(for: 1, then: .milliseconds(1_500))
        // Each once: the unknown commit as a remote one, the next as a local one; the refused never.
        #expect(found.flatMap { $0.changes.map(\.objectID) } == [committed.key], "heard \(found.map(\.changes))")
        let merged = await observed()
        #expect(merged.filter { $0 == committed.key }.count == 1, "the committed save merged \(merged.filter { $0 == committed.key }.count) times")
        #expect(merged.filter { $0 == after.key }.count == 1, "the next save merged \(merged.filter { $0 == after.key }.count) times")
        #expect(!merged.contains(refused.key))
        let stored = try await container.performBackgroundTask { context in try context.fetch(FetchRequest<Book>()).map(\.isbn).sorted() }
        #expect(stored == ["1", "3"])
        #expect(container.coordinator.remoteChangesFailure == nil)
        try cluster.sql("DROP TRIGGER slow_commit ON unknown_commit.\"Book\"; DROP FUNCTION unknown_commit.slow_commit()")
        try await container.close()
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
        // Once the listener, which connects on its own thread, has its session too.
        let sessions = try await settledSessions(admin, "loom-statement-timeout")
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
    /// How many sessions carry `name` once the count has held for 300 ms (at most 10 s).
    func settledSessions(_ admin: BackendTerminator, _ name: String) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(10)
        var count = try admin.sessions(applicationName: name), since = ContinuousClock.now
        while ContinuousClock.now - since < .milliseconds(300), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            let now = try admin.sessions(applicationName: name)
            if now != count { (count, since) = (now, ContinuousClock.now) }
        }
        return count
    }

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
