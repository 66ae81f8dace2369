import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
@_spi(LoomStore) import LoomPostgreSQL
import Synchronization
import Testing

/// Several processes on one store (Swift Testing exit tests, as the trap tests do): two write
/// from four contexts each, a third reads the history with tokens, and this process watches
/// the remote changes and purges old history meanwhile.
@Suite("Remote changes between processes", .serialized, .ownThreads, .timeLimit(.minutes(5)))
struct RemoteChangeProcessTests {
    typealias Book = LibraryRelsV2.Book

    static let contextsPerWriter = 4
    static let savesPerContext = 500
    static let writers = 2
    static var transactions: Int { writers * contextsPerWriter * savesPerContext }

    /// The job file children read: the store's kind and where it is (a SQLite file's path, or
    /// a PostgreSQL schema on the test server).
    static func jobFile(parent: Int32) -> URL {
        FileManager.default.temporaryDirectory.appending(path: "loom-remote-\(parent).job")
    }

    static func open(_ job: String) throws -> PersistentContainer {
        let schema = try LibraryRelsV2.schema()
        if job.hasPrefix("postgres:") {
            var configuration = try PostgresServer.configuration()
            configuration.schemaName = String(job.dropFirst("postgres:".count))
            return PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        }
        return PersistentContainer(store: try SQLiteStore(url: URL(filePath: job), schema: schema))
    }

    /// Created by the parent after its first purge of the history: writers wait for it before
    /// they end, so that the purge runs while they work, however slowly a loaded machine lets
    /// the parent's remote-change stream (which the purge waits for) follow them.
    static func purgedFile(parent: Int32) -> URL {
        FileManager.default.temporaryDirectory.appending(path: "loom-remote-\(parent).purged")
    }

    static func storePath() throws -> String {
        try String(contentsOf: jobFile(parent: getppid()), encoding: .utf8)
    }

    /// The last history number deleted, read from the store.
    static func deletedThrough(_ job: String, _ container: PersistentContainer) throws -> Int64 {
        if job.hasPrefix("postgres:") {
            return try (container.coordinator.store as! PostgreSQLStore).historyDeletedThrough()
        }
        return Int64(try SQLiteStore.savedState(at: URL(filePath: job)).metadata["historyDeletedThrough"] ?? "0") ?? 0
    }

    /// A writer process: four contexts save `savesPerContext` times each (an insert, and every
    /// third save a change to a book another context or process saved); meanwhile its view
    /// context holds the books it fetched. When every writer is done, the held books must show
    /// the store's values without being fetched again. Exit 4 if they do not within 20 s; 7 if
    /// the parent has not purged the history within 60 s of the saves.
    @MainActor
    static func write(process: Int) async throws {
        let container = try open(try storePath())
        let held = try container.viewContext.fetch(FetchRequest<Book>())
        try await withThrowingTaskGroup(of: Void.self) { group in
            for c in 0..<contextsPerWriter {
                let context = container.newBackgroundContext(name: "p\(process)c\(c)")
                group.addTask {
                    try await context.perform { context in
                        context.transactionAuthor = "p\(process)c\(c)"
                        for i in 0..<savesPerContext {
                            context.insert(Book(title: "p\(process)c\(c)-\(i)"))
                            if i % 3 == 0, let other = try context.fetch(FetchRequest<Book>(fetchLimit: 1, fetchOffset: i % 40)).first {
                                other.title += "+"
                            }
                            do {
                                try context.save()
                            } catch let error as LoomError where error.code == .versionConflict {
                                // Another process changed the same book first: drop this edit, keep the insert.
                                context.rollback()
                                context.insert(Book(title: "p\(process)c\(c)-\(i)"))
                                try context.save()
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let purgeDeadline = ContinuousClock.now + .seconds(60)
        while !FileManager.default.fileExists(atPath: purgedFile(parent: getppid()).path) {
            if ContinuousClock.now > purgeDeadline { exit(7) }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Every writer done: the store holds all their transactions.
        let total = transactions
        let deadline = ContinuousClock.now + .seconds(60)
        while try await container.performBackgroundTask({ try $0.count(for: FetchRequest<Book>()) }) < total + 10 {
            if ContinuousClock.now > deadline { exit(3) }
            try await Task.sleep(for: .milliseconds(20))
        }
        let store = try await container.performBackgroundTask { context in
            Dictionary(uniqueKeysWithValues: try context.fetch(FetchRequest<Book>()).map { ($0.objectID.erased, $0.title) })
        }
        let settled = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < settled {
            let equal = held.allSatisfy { store[$0.objectID.erased] == $0.title }
            if equal {
                try await container.close()
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        exit(4)
    }

    /// The reader process: reads the history after its token, in chunks, until it has seen
    /// every writer's transaction. Exit 5 if one came twice, out of order or with a gap; 6 if
    /// its token expired although the history after it was not deleted.
    static func read() async throws {
        let path = try storePath()
        let container = try open(path)
        // From the seed transaction (#1), which this process's parent saved before starting it.
        let current = try await container.performBackgroundTask { try $0.currentHistoryToken() }
        var token = current.map { HistoryToken(storeIdentifier: $0.storeIdentifier, transactionNumber: 1) }
        var seen = 0
        let deadline = ContinuousClock.now + .seconds(120)
        while seen < transactions {
            if ContinuousClock.now > deadline { exit(3) }
            let after = token
            do {
                let chunk = try await container.performBackgroundTask { context in
                    try context.fetchHistory(HistoryDescriptor(after: after, fetchLimit: 100))
                }
                for transaction in chunk {
                    if let token, transaction.token.transactionNumber != token.transactionNumber + 1 { exit(5) }
                    token = transaction.token
                    seen += 1
                }
                if chunk.isEmpty { try await Task.sleep(for: .milliseconds(2)) }
            } catch let error as LoomError where error.code == .historyTokenExpired {
                let deleted = try Self.deletedThrough(path, container)
                if deleted <= after?.transactionNumber ?? 0 { exit(6) }
                // Purged under it: allowed, and then it starts again from now.
                exit(0)
            }
        }
        try await container.close()
    }

    @Test("Two processes × four contexts write, a third reads with tokens, history is purged meanwhile: every transaction seen once, in commit order; each writer's view context ends equal to the store", arguments: StoreKind.persistentCases)
    func twoWritersAndAReader(kind: StoreKind) async throws {
        let location = kind == .postgres
            ? "postgres:" + (try PostgresServer.configuration().schemaName)
            : TemporaryDirectory.make().appending(path: "shared.loom").path
        let job = Self.jobFile(parent: getpid()), purgedMarker = Self.purgedFile(parent: getpid())
        try? FileManager.default.removeItem(at: purgedMarker)
        try location.write(to: job, atomically: true, encoding: .utf8)
        defer {
            try? FileManager.default.removeItem(at: job)
            try? FileManager.default.removeItem(at: purgedMarker)
        }
        let container = try Self.open(location)
        try await container.save { context in
            for i in 0..<10 { context.insert(Book(title: "seed \(i)")) }
        }
        let stream = container.remoteChanges()
        // The last transaction this process's remote-change stream handed on: the purge never
        // deletes one it has not read (an app purges what its consumers have consumed), so a
        // loaded machine slows the stream down without making it lose history.
        let watched = LastWatched()
        let watcher = Task { () -> (count: Int, ordered: Bool, lost: Bool, authors: Set<String>) in
            var last: Int64 = 1, count = 0, ordered = true
            var authors: Set<String> = []
            for await event in stream {
                // Lost history ends the watch (and fails the test) instead of waiting forever.
                if event.historyWasLost { return (count, false, true, authors) }
                for transaction in event.transactions {
                    if transaction.token.transactionNumber != last + 1 { ordered = false }
                    last = transaction.token.transactionNumber
                    authors.insert(transaction.author ?? "?")
                    count += 1
                }
                watched.number.withLock { [last] in $0 = last }
                if count >= Self.transactions { break }
            }
            return (count, ordered, false, authors)
        }
        let purger = Task { () -> (purges: Int, failures: [String]) in
            // Deletes all but the last 1,500 transactions (and none the stream has not handed
            // on), every 20 ms, while the others work.
            var purges = 0, failures: [String] = []
            while !Task.isCancelled {
                do {
                    if let current = try await container.performBackgroundTask({ try $0.currentHistoryToken() }) {
                        let through = min(current.transactionNumber - 1_500, watched.number.withLock { $0 } - 1)
                        if through > 1 {
                            try await container.performBackgroundTask { context in
                                try context.deleteHistory(through: HistoryToken(storeIdentifier: current.storeIdentifier, transactionNumber: through))
                            }
                            purges += 1
                            if purges == 1 { try Data().write(to: purgedMarker) }
                        }
                    }
                } catch {
                    failures.append("\(error)")
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return (purges, failures)
        }
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await #expect(processExitsWith: .success) { try await RemoteChangeProcessTests.read() } }
            group.addTask { await #expect(processExitsWith: .success) { try await RemoteChangeProcessTests.write(process: 0) } }
            group.addTask { await #expect(processExitsWith: .success) { try await RemoteChangeProcessTests.write(process: 1) } }
        }
        purger.cancel()
        let purged = await purger.value
        #expect(purged.failures.isEmpty)
        #expect(purged.purges > 0, "the purge ran while the others worked")
        print("remote changes between processes (\(kind)): \(Self.transactions) transactions by \(Self.writers) processes × \(Self.contextsPerWriter) contexts in \(ContinuousClock.now - start)")
        let seen = await watcher.value
        #expect(!seen.lost, "the remote-change stream lost history after \(seen.count) transactions")
        #expect(seen.count == Self.transactions)
        #expect(seen.ordered)
        #expect(seen.authors.count == Self.writers * Self.contextsPerWriter)
        try await container.close()
    }
}

/// The last transaction a remote-change stream handed on, shared with the purge.
private final class LastWatched: Sendable {
    let number = Mutex<Int64>(1)
}
