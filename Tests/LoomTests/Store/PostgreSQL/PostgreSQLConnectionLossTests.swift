import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomTesting) import LoomPostgreSQL
import Testing

/// A PostgreSQL server that goes away — stopped, its sessions ended, or silent — and comes
/// back: every call fails with `storeFailure` within the response timeout, the context keeps
/// its changes, and the same container works again once the server answers. Each test runs on
/// a cluster of its own (``OwnedPostgresCluster``), never on the shared test server.
///
/// Serialized, and run by `./scripts/test` in a `swift test` of its own: its tests wait
/// synchronously (for `initdb`, `pg_ctl`, and saves against a silent server, up to the timeout)
/// on the cooperative thread pool, which has one thread per core. Beside the rest of the suite
/// on a 2-core machine, they stalled every other test until those ran out of time.
@Suite("PostgreSQL connection loss", .serialized, PostgresServer.required, .timeLimit(.minutes(2)))
struct PostgreSQLConnectionLossTests {
    static let timeout: Duration = .seconds(2)

    /// A container on the cluster and a second instance of the same store (another server).
    func pair(_ cluster: OwnedPostgresCluster) throws -> (PersistentContainer, PersistentContainer) {
        let schema = try Schema(Book.self)
        let configuration = try cluster.configuration(timeout: Self.timeout)
        return (PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema)),
                PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema)))
    }

    /// Runs `body` and returns the code of the `LoomError` it threw (`nil`: none) and how long it took.
    func failure<T>(_ body: () throws -> T) -> (code: LoomError.Code?, took: Duration) {
        let start = ContinuousClock.now
        do {
            _ = try body()
            return (nil, ContinuousClock.now - start)
        } catch {
            return ((error as? LoomError)?.code, ContinuousClock.now - start)
        }
    }

    /// The other instance saves; `container` must hear it on `stream` (the listener
    /// reconnected and listens again). Then both close.
    func expectOtherIsHeard(by container: PersistentContainer, on stream: AsyncStream<RemoteChangeEvent>, other: PersistentContainer, isbn: String) async throws {
        try await other.save { context in
            context.transactionAuthor = "other"
            context.insert(Book(isbn: isbn, title: "From the other server"))
        }
        #expect(await RemoteChangeTests.collect(stream, count: 1).map(\.author) == ["other"])
        #expect(container.coordinator.remoteChangesFailure == nil)
        try await other.close()
        try await container.close()
    }

    @Test("With the server stopped, a save, a fetch and a fault throw storeFailure within the timeout and the context keeps its changes; once it is back, the same container saves, fetches, faults and hears the other instance again")
    func serverStoppedAndBack() async throws {
        let cluster = try OwnedPostgresCluster()
        let (container, other) = try pair(cluster)
        let heard = container.remoteChanges()
        let context = container.newBackgroundContext()
        let id = try context.performAndWait { context in
            let book = Book(isbn: "1", title: "Saved", pages: 10)
            context.insert(book)
            try context.save()
            return book.objectID
        }

        try cluster.halt()
        context.performAndWait { context in
            context.insert(Book(isbn: "2", title: "Pending"))
            let save = failure { try context.save() }
            #expect(save.code == .storeFailure)
            #expect(save.took < Self.timeout + .seconds(3), "the save took \(save.took)")
            #expect(context.inserted.count == 1)      // unchanged: the save can be retried
            #expect(context.hasChanges)

            let fetch = failure { try context.fetch(FetchRequest<Book>()) }
            #expect(fetch.code == .storeFailure)
            #expect(fetch.took < Self.timeout + .seconds(3), "the fetch took \(fetch.took)")
        }
        let faulting = container.newBackgroundContext()
        try faulting.performAndWait { faulting in
            let fault = try faulting.object(with: id)
            #expect(failure { try faulting.fulfillFault(of: fault) }.code == .storeFailure)
            #expect(fault.isFault)
        }
        #expect(failure { try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<Book>()) } }.code == .storeFailure)

        try cluster.resume()
        try context.performAndWait { context in
            context.insert(Book(isbn: "3", title: "After"))
            try context.save()                                 // the pending insert too
            #expect(!context.hasChanges)
            let fault = try context.existingObject(with: id)
            #expect(fault.pages == 10)
            #expect(try context.count(for: FetchRequest<Book>()) == 3)
        }
        try faulting.performAndWait { faulting in
            let fault = try faulting.object(with: id)
            try faulting.fulfillFault(of: fault)
            #expect(fault.title == "Saved")
        }
        try await expectOtherIsHeard(by: container, on: heard, other: other, isbn: "4")
    }

    @Test("Sessions ended by pg_terminate_backend while idle are replaced: the next save, fetch and other instance's commit work; a pinned query generation reports storeFailure")
    func sessionsTerminated() async throws {
        let cluster = try OwnedPostgresCluster()
        let (container, other) = try pair(cluster)
        let heard = container.remoteChanges()
        let context = container.newBackgroundContext()
        let pinned = container.newBackgroundContext()
        try await container.save { context in context.insert(Book(isbn: "1", title: "Saved")) }
        try pinned.performAndWait { pinned in
            try pinned.setQueryGenerationFrom(.current)
            #expect(try pinned.count(for: FetchRequest<Book>()) == 1)
        }
        try await Task.sleep(for: .milliseconds(200))      // the listener is listening

        #expect(try cluster.terminateStoreSessions() >= 4)  // writers, readers, listeners, the snapshot
        try await Task.sleep(for: .milliseconds(200))
        try context.performAndWait { context in
            context.insert(Book(isbn: "2", title: "After"))
            try context.save()
            #expect(try context.count(for: FetchRequest<Book>()) == 2)
        }
        try pinned.performAndWait { pinned in
            #expect(failure { try pinned.count(for: FetchRequest<Book>()) }.code == .storeFailure)
            try pinned.setQueryGenerationFrom(.current)     // a new generation works
            #expect(try pinned.count(for: FetchRequest<Book>()) == 2)
        }
        try await expectOtherIsHeard(by: container, on: heard, other: other, isbn: "3")
    }

    @Test("A server that stops answering (its sessions frozen): a save is commitOutcomeUnknown and a fetch a storeFailure after the timeout, and close() does not hang; thawed, the store works again")
    func silentServer() async throws {
        let cluster = try OwnedPostgresCluster()
        let (container, other) = try pair(cluster)
        try await other.close()
        let context = container.newBackgroundContext()
        try await container.save { context in context.insert(Book(isbn: "1", title: "Saved")) }
        let frozen = try cluster.storeSessions()
        for pid in frozen { kill(pid, SIGSTOP) }
        defer { for pid in frozen { kill(pid, SIGCONT) } }

        context.performAndWait { context in
            context.insert(Book(isbn: "2", title: "Pending"))
            let save = failure { try context.save() }
            // A save is one statement: it went out, so whether it committed is unknown.
            #expect(save.code == .commitOutcomeUnknown)
            #expect(save.took >= Self.timeout && save.took < Self.timeout + .seconds(3), "the save took \(save.took)")
            #expect(context.hasChanges)
            let fetch = failure { try context.fetch(FetchRequest<Book>()) }
            #expect(fetch.code == .storeFailure)
            #expect(fetch.took < Self.timeout + .seconds(3), "the fetch took \(fetch.took)")
        }
        for pid in frozen { kill(pid, SIGCONT) }
        try await Task.sleep(for: .milliseconds(300))
        try context.performAndWait { context in
            // Thawed, the server ran the statement it had received: the book is there, once.
            context.rollback()
            #expect(try context.count(for: FetchRequest<Book>()) == 2)
            context.insert(Book(isbn: "3", title: "After"))
            try context.save()
            #expect(try context.count(for: FetchRequest<Book>()) == 3)
        }

        let again = try cluster.storeSessions()
        for pid in again { kill(pid, SIGSTOP) }
        defer { for pid in again { kill(pid, SIGCONT) } }
        let start = ContinuousClock.now
        try await container.close()
        #expect(ContinuousClock.now - start < Self.timeout * 3 + .seconds(3))
    }

    @Test("A connection lost after COMMIT (or a save in one statement) was sent is commitOutcomeUnknown, not a plain failure: here the commit happened after all",
          arguments: [false, true])
    func commitOutcomeUnknown(oneStatement: Bool) async throws {
        let cluster = try OwnedPostgresCluster()
        let frozen = FrozenSessions()
        var configuration = try cluster.configuration(timeout: Self.timeout)
        if !oneStatement { configuration.insideSaveTransaction = { _ in } }   // statement by statement
        configuration.trace = { sql in
            // Freeze the writer's session just before the statement that commits goes out: the
            // server receives it and answers only once thawed, after the store gave up.
            guard sql == "COMMIT" || sql.hasPrefix("WITH loom_lock"), frozen.isArmed else { return }
            let pids = (try? cluster.sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'loom' AND state IN ('idle', 'idle in transaction')").compactMap { Int32($0) }) ?? []
            frozen.freeze(pids)
        }
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)))
        let context = container.newBackgroundContext()
        context.performAndWait { context in
            context.insert(Book(isbn: "1", title: "Maybe saved"))
            frozen.arm()
            let save = failure { try context.save() }
            #expect(save.code == .commitOutcomeUnknown)
            #expect(context.hasChanges)
        }
        #expect(frozen.thaw() >= 1)     // the writer's session, and any idle reader's
        try await Task.sleep(for: .milliseconds(300))
        let saved = try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<Book>()) }
        #expect(saved == 1)
        try await container.close()
    }
}

/// Server sessions a test froze with SIGSTOP, to thaw.
///
/// `@unchecked Sendable`: its state is only touched with `lock` held.
final class FrozenSessions: @unchecked Sendable {
    private let lock = NSLock()
    private var armed = false
    private var pids: [Int32] = []

    var isArmed: Bool { lock.withLock { armed } }
    func arm() { lock.withLock { armed = true } }

    func freeze(_ sessions: [Int32]) {
        lock.withLock {
            armed = false
            pids += sessions
        }
        for pid in sessions { kill(pid, SIGSTOP) }
    }

    /// Thaws the frozen sessions; returns how many there were.
    func thaw() -> Int {
        let sessions = lock.withLock { () -> [Int32] in
            defer { pids = [] }
            return pids
        }
        for pid in sessions { kill(pid, SIGCONT) }
        return sessions.count
    }

    deinit { _ = thaw() }
}
