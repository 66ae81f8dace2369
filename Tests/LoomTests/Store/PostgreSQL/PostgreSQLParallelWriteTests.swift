import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) @_spi(LoomTesting) import LoomPostgreSQL
import Synchronization
import Testing

/// Saves of several app servers on one PostgreSQL store run in parallel, while the history
/// keeps one gap-free order (commit order) for every consumer, and an exclusive write still
/// excludes every other server. Slowness is put inside the saves' transactions through
/// ``PostgreSQLStore/Configuration/insideSaveTransaction``. The tasks the tests start run on
/// threads of their own too (``OwnThreadsExecutor``): a test of another suite that holds the
/// cooperative pool must not stall them.
@Suite("PostgreSQL parallel writes", PostgresServer.required, .serialized, .ownThreads, .timeLimit(.minutes(5)))
struct PostgreSQLParallelWriteTests {
    /// How long each save of the overlap test sleeps inside its transaction.
    static let delay = 0.05
    static let processes = 4
    static let savesPerProcess = 2

    /// The folder the parent and its children share for one run of the overlap test.
    static func folder(parent: Int32) -> URL {
        FileManager.default.temporaryDirectory.appending(path: "loom-parallel-writes-\(parent)")
    }

    /// A store of `Book`s in `schemaName` on the test server, whose saves call `inside` in
    /// their transactions (statement by statement), or whose saves in one statement make the
    /// server sleep `pause` seconds there.
    static func open(
        _ schemaName: String, inside: (@Sendable (PostgreSQLStore.SaveTransactionPoint) -> Void)? = nil,
        pause: (@Sendable (PostgreSQLStore.SaveTransactionPoint) -> Double)? = nil, trace: (@Sendable (String) -> Void)? = nil
    ) throws -> PersistentContainer {
        var configuration = try PostgresServer.configuration(trace: trace)
        configuration.schemaName = schemaName
        configuration.insideSaveTransaction = inside
        configuration.pauseInsideOneStatementSave = pause
        return PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)))
    }

    /// Whether a child's saves sleep inside their transactions (not while it warms up), and
    /// when each sleep started and ended.
    static let timing = Atomic<Bool>(false)
    static let sleeps = Mutex<[String]>([])

    /// An app-server process: opens the store and saves once (warming up), says it is ready,
    /// waits for the parent's go, then saves its own two books one after the other, each save
    /// sleeping ``delay`` inside its transaction before its history row, and writes when each
    /// save and each sleep started and ended (seconds since 1970). Exit 3 if no go came within
    /// 60 s.
    static func saveSlowly(process: Int) async throws {
        let folder = folder(parent: getppid())
        let schemaName = try String(contentsOf: folder.appending(path: "schema"), encoding: .utf8)
        let container = try open(schemaName) { point in
            guard point == .beforeHistory, timing.load(ordering: .relaxed) else { return }
            let start = Date().timeIntervalSince1970
            Thread.sleep(forTimeInterval: delay)
            let end = Date().timeIntervalSince1970
            sleeps.withLock { $0.append("sleep \(start) \(end)") }
        }
        let context = container.newBackgroundContext(name: "p\(process)")
        let books = try await context.perform { context in
            context.insert(Book(isbn: "warm-up \(process)", title: "warm-up"))
            try context.save()
            context.transactionAuthor = "timed"
            return try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.title == "seed" }, sortBy: [SortDescriptor(\.isbn)])).map(\.objectID)
        }
        timing.store(true, ordering: .relaxed)
        try Data().write(to: folder.appending(path: "ready-\(process)"))
        let deadline = ContinuousClock.now + .seconds(60)
        while !FileManager.default.fileExists(atPath: folder.appending(path: "go").path) {
            if ContinuousClock.now > deadline { exit(3) }
            try await Task.sleep(for: .milliseconds(1))
        }
        var times: [String] = []
        for save in 0..<savesPerProcess {
            let id = books[process * savesPerProcess + save]
            let span = try await context.perform { context in
                let book = try context.existingObject(with: id)
                book.title = "saved by p\(process)"
                let start = Date().timeIntervalSince1970
                try context.save()
                return "save \(start) \(Date().timeIntervalSince1970)"
            }
            times.append(span)
        }
        try (times + sleeps.withLock { $0 }).joined(separator: "\n").write(to: folder.appending(path: "times-\(process)"), atomically: true, encoding: .utf8)
        try await container.close()
    }

    @Test("Eight saves of four app-server processes on different objects, each 50 ms inside its transaction, run their transactions at the same time (in well under 8 × 50 ms on a quiet machine); history numbers them one after the other")
    func savesOfProcessesOverlap() async throws {
        let schemaName = try PostgresServer.configuration().schemaName
        let folder = Self.folder(parent: getpid())
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try schemaName.write(to: folder.appending(path: "schema"), atomically: true, encoding: .utf8)
        let container = try Self.open(schemaName)
        let count = Self.processes * Self.savesPerProcess
        try await container.save { context in
            for i in 0..<count { context.insert(Book(isbn: String(format: "%02d", i), title: "seed")) }
        }
        let seed = try #require(try await container.performBackgroundTask { try $0.currentHistoryToken() })

        let go = Task(executorPreference: OwnThreadsExecutor.shared) {
            // Every child has opened its store: the saves start together.
            let deadline = ContinuousClock.now + .seconds(90)
            while (0..<Self.processes).contains(where: { !FileManager.default.fileExists(atPath: folder.appending(path: "ready-\($0)").path) }) {
                if ContinuousClock.now > deadline { return }
                try? await Task.sleep(for: .milliseconds(2))
            }
            try? Data().write(to: folder.appending(path: "go"))
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await #expect(processExitsWith: .success) { try await PostgreSQLParallelWriteTests.saveSlowly(process: 0) } }
            group.addTask { await #expect(processExitsWith: .success) { try await PostgreSQLParallelWriteTests.saveSlowly(process: 1) } }
            group.addTask { await #expect(processExitsWith: .success) { try await PostgreSQLParallelWriteTests.saveSlowly(process: 2) } }
            group.addTask { await #expect(processExitsWith: .success) { try await PostgreSQLParallelWriteTests.saveSlowly(process: 3) } }
        }
        await go.value

        var spans: [String: [(start: Double, end: Double)]] = [:]
        for process in 0..<Self.processes {
            let text = try String(contentsOf: folder.appending(path: "times-\(process)"), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ")
                spans[String(parts[0]), default: []].append((Double(parts[1])!, Double(parts[2])!))
            }
        }
        let saves = spans["save"] ?? [], sleeps = spans["sleep"] ?? []
        try #require(saves.count == count && sleeps.count == count)
        let elapsed = saves.map(\.end).max()! - saves.map(\.start).min()!
        // The most sleeps under way at one instant: 1 if the saves' transactions took turns.
        let overlapping = sleeps.map { sleep in sleeps.filter { $0.start <= sleep.start && sleep.start < $0.end }.count }.max()!
        print("PostgreSQL parallel writes: \(count) saves of \(Self.processes) processes, \(Int(Self.delay * 1000)) ms inside each, in \(Int(elapsed * 1000)) ms (one at a time: at least \(Int(Double(count) * Self.delay * 1000)) ms); up to \(overlapping) transactions sleeping at once")
        // Saves taking turns would never sleep at once, and would take at least 8 × 50 ms. The
        // time itself is printed, not checked: on a loaded machine the processes' other work
        // (scheduling, their reads of the go signal) stretches it, overlap or not.
        #expect(overlapping >= 2, "the saves' transactions took turns")
        // Each process saves twice in turn: 2 × 50 ms is the floor.
        #expect(elapsed >= Double(Self.savesPerProcess) * Self.delay)

        // Every save committed, each once in the history, numbered on from the seed.
        let history = try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor(after: seed)) }
        #expect(history.map(\.token.transactionNumber) == Array((seed.transactionNumber + 1)...(seed.transactionNumber + Int64(count + Self.processes))))
        #expect(history.filter { $0.author == "timed" }.count == count)
        let titles = try await container.performBackgroundTask { try $0.fetch(FetchRequest<Book>(predicate: #Predicate { $0.title != "warm-up" })).map(\.title) }
        #expect(Set(titles) == Set((0..<Self.processes).map { "saved by p\($0)" }))
        try await container.close()
    }

    @Test("A consumer reading the history while four servers save with random delays inside their transactions sees every transaction once, in commit order, with no gap; so does the remote-change listener (saves statement by statement, and in one statement)",
          arguments: [false, true])
    func historyConsumerNeverSkipsALateCommit(oneStatement: Bool) async throws {
        let schemaName = try PostgresServer.configuration().schemaName
        let writers = 4, savesPerWriter = 30
        let total = writers * savesPerWriter
        // Random sleeps before the history row (saves overlap there) and before COMMIT (a late
        // commit of a transaction numbered earlier is the trap a consumer must not fall into):
        // on the saving thread between statements, or in the server inside the one statement.
        let pause: @Sendable (PostgreSQLStore.SaveTransactionPoint) -> Double = { point in
            Double.random(in: 0...(point == .beforeHistory ? 0.012 : 0.004))
        }
        let slow: @Sendable (PostgreSQLStore.SaveTransactionPoint) -> Void = { point in Thread.sleep(forTimeInterval: pause(point)) }
        let oneStatementSaves = StatementCounter()
        let consumer = try Self.open(schemaName)
        let servers = try (0..<writers).map { _ in
            try oneStatement
                ? Self.open(schemaName, pause: pause, trace: { if $0.hasPrefix("WITH loom_lock") { oneStatementSaves.add() } })
                : Self.open(schemaName, inside: slow)
        }
        try await servers[0].save { $0.insert(Book(isbn: "seed", title: "seed")) }
        let seed = try #require(try await consumer.performBackgroundTask { try $0.currentHistoryToken() })

        let stream = consumer.remoteChanges()
        let listened = Task(executorPreference: OwnThreadsExecutor.shared) { () -> [Int64] in
            var numbers: [Int64] = []
            for await event in stream {
                if event.historyWasLost { break }
                numbers += event.transactions.map(\.token.transactionNumber)
                if numbers.last ?? 0 >= seed.transactionNumber + Int64(total) { break }
            }
            return numbers
        }
        let polled = Task(executorPreference: OwnThreadsExecutor.shared) { () throws -> [(number: Int64, author: String)] in
            var seen: [(number: Int64, author: String)] = []
            var token = seed
            let deadline = ContinuousClock.now + .seconds(120)
            while seen.count < total, ContinuousClock.now < deadline {
                let after = token
                let chunk = try await consumer.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor(after: after, fetchLimit: 7)) }
                for transaction in chunk {
                    seen.append((transaction.token.transactionNumber, transaction.author ?? "?"))
                    token = transaction.token
                }
                if chunk.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
            }
            return seen
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (w, server) in servers.enumerated() {
                group.addTask {
                    let context = server.newBackgroundContext(name: "w\(w)")
                    try await context.perform { context in
                        context.transactionAuthor = "w\(w)"
                        for i in 0..<savesPerWriter {
                            context.insert(Book(isbn: "w\(w)-\(i)", title: "w\(w)"))
                            try context.save()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let seen = try await polled.value
        #expect(oneStatementSaves.value == (oneStatement ? total + 1 : 0))     // the seed's save too
        let expected = Array((seed.transactionNumber + 1)...(seed.transactionNumber + Int64(total)))
        #expect(seen.map(\.number) == expected, "the consumer skipped, repeated or reordered a transaction")
        #expect(Dictionary(grouping: seen, by: \.author).mapValues(\.count) == Dictionary(uniqueKeysWithValues: (0..<writers).map { ("w\($0)", savesPerWriter) }))
        // The listener may have started before the seed, and then hands it on too.
        let heard = await listened.value.drop { $0 == seed.transactionNumber }
        #expect(Array(heard) == expected, "the remote-change listener skipped, repeated or reordered a transaction")
        #expect(try await consumer.performBackgroundTask { try $0.count(for: FetchRequest<Book>()) } == total + 1)
        for server in servers { try await server.close() }
        try await consumer.close()
    }

    @Test("Eight saves in one statement of four app servers on different objects, each 50 ms inside its transaction in the server, run at the same time; history numbers them one after the other")
    func oneStatementSavesOverlap() async throws {
        let schemaName = try PostgresServer.configuration().schemaName
        let statements = StatementCounter()
        let servers = try (0..<Self.processes).map { _ in
            try Self.open(schemaName, pause: { $0 == .beforeHistory ? Self.delay : 0 }, trace: { if $0.hasPrefix("WITH loom_lock") { statements.add() } })
        }
        let count = Self.processes * Self.savesPerProcess
        let ids = try await servers[0].performBackgroundTask { context in
            let books = (0..<count).map { Book(isbn: String(format: "%02d", $0), title: "seed") }
            for book in books { context.insert(book) }
            try context.save()
            return books.map(\.objectID)
        }
        let seed = try #require(try await servers[0].performBackgroundTask { try $0.currentHistoryToken() })
        let spans = try await withThrowingTaskGroup(of: [(start: Double, end: Double)].self) { group in
            for (s, server) in servers.enumerated() {
                group.addTask(executorPreference: OwnThreadsExecutor.shared) {
                    let context = server.newBackgroundContext(name: "s\(s)")
                    return try await context.perform { context in
                        var spans: [(start: Double, end: Double)] = []
                        for save in 0..<Self.savesPerProcess {
                            try context.existingObject(with: ids[s * Self.savesPerProcess + save]).title = "saved by s\(s)"
                            let start = Date().timeIntervalSince1970
                            try context.save()
                            spans.append((start, Date().timeIntervalSince1970))
                        }
                        return spans
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(statements.value == 1 + count, "every save was one statement")
        let elapsed = spans.map(\.end).max()! - spans.map(\.start).min()!
        // Each save sleeps 50 ms in the server: the most saves under way at one instant is 1 if
        // they took turns.
        let overlapping = spans.map { span in spans.filter { $0.start <= span.start && span.start < $0.end }.count }.max()!
        print("PostgreSQL one-statement saves: \(count) saves of \(Self.processes) servers, \(Int(Self.delay * 1000)) ms inside each, in \(Int(elapsed * 1000)) ms (one at a time: at least \(Int(Double(count) * Self.delay * 1000)) ms); up to \(overlapping) under way at once")
        #expect(spans.allSatisfy { $0.end - $0.start >= Self.delay }, "the server did not sleep inside the save")
        #expect(overlapping >= 2, "the saves took turns")
        let history = try await servers[0].performBackgroundTask { try $0.fetchHistory(HistoryDescriptor(after: seed)) }
        #expect(history.map(\.token.transactionNumber) == Array((seed.transactionNumber + 1)...(seed.transactionNumber + Int64(count))))
        for server in servers { try await server.close() }
    }

    @Test("An exclusive write of one server holds every other server's saves until it commits; they then commit after it, unrefused")
    func exclusiveWriteExcludesOtherServers() async throws {
        let schemaName = try PostgresServer.configuration().schemaName
        let first = try Self.open(schemaName), second = try Self.open(schemaName)
        try await first.save { $0.insert(Book(isbn: "1", title: "before")) }
        let inside = Flag()
        let exclusive = Task(executorPreference: OwnThreadsExecutor.shared) { () throws in
            try await first.performExclusiveWrite { context in
                let book = try #require(try context.fetch(FetchRequest<Book>()).first)
                book.title = "exclusive"
                try context.save()
                inside.sleepStarted.withLock { $0 = Date().timeIntervalSince1970 }
                inside.value.store(true, ordering: .releasing)
                Thread.sleep(forTimeInterval: 0.3)
            }
        }
        while !inside.value.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(1)) }
        // A save of the other server, of an object of its own, waits for the commit, which
        // comes after the exclusive write's sleep.
        try await second.save { context in
            context.insert(Book(isbn: "2", title: "other server"))
        }
        let saved = Date().timeIntervalSince1970
        _ = try await exclusive.value
        #expect(saved - inside.sleepStarted.withLock { $0 } >= 0.3, "the other server saved during the exclusive write")
        let history = try await second.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()) }
        #expect(history.map(\.token.transactionNumber) == [1, 2, 3])
        #expect(history.last?.changes.first?.kind == .insert, "the other server's save is numbered after the exclusive write")
        try await first.close()
        try await second.close()
    }
}

/// Counts from any thread.
private final class StatementCounter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// Set once by one task, read by another.
private final class Flag: Sendable {
    let value = Atomic<Bool>(false)
    /// When the exclusive write began its sleep (seconds since 1970).
    let sleepStarted = Mutex<Double>(0)
}
