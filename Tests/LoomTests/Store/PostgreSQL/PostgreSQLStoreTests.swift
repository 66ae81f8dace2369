import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

/// What only the PostgreSQL store has to prove: round trips (postgres-nio does not pipeline),
/// blocking waits that cannot deadlock, values PostgreSQL cannot store, configuration, and the
/// refusal of foreign schemas. Everything store-independent runs on PostgreSQL in
/// the other suites (`StoreKind.postgres`).
@Suite("PostgreSQL store", PostgresServer.required, .timeLimit(.minutes(5)))
struct PostgreSQLStoreTests {
    /// The statements a store runs, by kind.
    final class Statements: @unchecked Sendable {
        private let lock = NSLock()
        private var all: [String] = []
        var hook: @Sendable (String) -> Void { { [self] sql in lock.withLock { all.append(sql) } } }
        func reset() { lock.withLock { all = [] } }
        var list: [String] { lock.withLock { all } }
        /// Statements other than the key allocator's (which runs on a connection of its own).
        var saving: [String] { list.filter { !$0.contains("loom_keys") } }
    }

    @Test("A save of 1,000 changed objects of one entity is a constant number of statements, not one per object", arguments: [10, 1_000])
    func saveRoundTrips(count: Int) throws {
        let log = Statements()
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self), trace: log.hook))
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            for i in 0..<count { context.insert(Book(isbn: "\(i)", title: "Title \(i)", pages: i)) }
            log.reset()
            try context.save()
            // One statement: the write lock (shared), one INSERT, the commit lock and the history
            // row (PostgreSQLOneStatementSaveTests).
            #expect(log.saving.count == 1, "\(log.saving)")
            #expect(log.saving.filter { $0.contains("pg_advisory_xact_lock_shared") }.count == 1)
            #expect(log.saving.filter { $0.contains("INSERT INTO \"Book\"") }.count == 1)

            let books = try context.fetch(FetchRequest<Book>())
            for book in books { book.pages += 1 }
            log.reset()
            try context.save()
            #expect(log.saving.count == 1, "\(log.saving)")
            #expect(log.saving.filter { $0.contains("UPDATE \"Book\"") }.count == 1)

            for book in books { context.delete(book) }
            log.reset()
            try context.save()
            #expect(log.saving.count == 1, "\(log.saving)")
            #expect(try context.count(for: FetchRequest<Book>()) == 0)
        }
        // Keys come in blocks: far fewer reservations than objects.
        let reservations = log.list.filter { $0.contains("loom_keys") }.count
        #expect(reservations <= 2)
    }

    @Test("A save of 20,001 new objects is three INSERTs of at most 10,000 rows, sent one after the other without waiting; a duplicate in the last fails the save, saves nothing, and the save after it works")
    func chunkedInserts() throws {
        let log = Statements()
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self), trace: log.hook))
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            context.insert(Book(isbn: "taken", title: "First"))
            try context.save()
            var books: [Book] = []
            for i in 0..<20_001 { books.append(Book(isbn: "\(i)", title: "Title \(i)", pages: i)) }
            let duplicate = Book(isbn: "taken", title: "Again")
            books.append(duplicate)
            for book in books { context.insert(book) }
            log.reset()
            let error = try #require(throws: LoomError.self) { try context.save() }
            #expect(error.code == .uniquenessViolation)
            #expect(error.attributeNames == ["isbn"])
            #expect(context.inserted.count == 20_002)
            #expect(try container.newBackgroundContext().performAndWait { try $0.count(for: FetchRequest<Book>()) } == 1)

            context.delete(duplicate)
            log.reset()
            try context.save()
            let inserts = log.saving.filter { $0.hasPrefix("INSERT INTO \"Book\"") }
            #expect(inserts.count == 3, "\(log.saving)")
            // BEGIN, the write lock, three INSERTs, the commit lock, the history row, COMMIT.
            #expect(log.saving.count == 8, "\(log.saving)")
        }
        let other = container.newBackgroundContext()
        try other.performAndWait { context in
            #expect(try context.count(for: FetchRequest<Book>()) == 20_002)
            let pages = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "20000" })).first?.pages
            #expect(pages == 20_000)
            // The history row records every key (as runs), read back one by one.
            let history = try context.fetchHistory(HistoryDescriptor())
            #expect(history.last?.changes.count == 20_001)
            #expect(Set(history.last?.changes.map(\.objectID) ?? []).count == 20_001)
        }
    }

    @Test("A to-many fault is one query, and prefetching a relationship for a whole fetch is one more")
    func relationshipRoundTrips() throws {
        let log = Statements()
        let container = try StoreKind.postgres.makeGraphContainer(trace: log.hook)
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            for a in 0..<20 {
                let author = Author(name: "A\(a)")
                context.insert(author)
                for n in 0..<5 { context.insert(Novel(title: "N\(a)-\(n)", pages: n, author: author)) }
            }
            try context.save()
            context.reset()
            let authors = try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)]))
            log.reset()
            #expect(authors[0].novels.count == 5)
            #expect(log.list.count == 1, "\(log.list)")

            context.reset()
            var request = FetchRequest<Author>(sortBy: [SortDescriptor(\.name)])
            request.relationshipKeyPathsForPrefetching = [\Author.novels]
            log.reset()
            let prefetched = try context.fetch(request)
            #expect(prefetched.reduce(0) { $0 + $1.novels.count } == 100)
            #expect(log.list.count == 2, "\(log.list)")
        }
    }

    @Test("The main actor firing a fault while every event loop is busy waits for it, and does not deadlock")
    @MainActor
    func faultWhileEventLoopsBusy() async throws {
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self)))
        let id = try await container.performBackgroundTask { context in
            let book = Book(isbn: "1", title: "Busy")
            context.insert(book)
            try context.save()
            return book.objectID
        }
        // Occupy every thread of the event-loop group the store's connections run on.
        let group = MultiThreadedEventLoopGroup.singleton
        let busy = (0..<8).map { _ in group.next().submit { Thread.sleep(forTimeInterval: 0.3) } }
        let started = Date()
        let context = container.viewContext
        let book = try context.existingObject(with: id)
        #expect(book.title == "Busy")
        #expect(Date().timeIntervalSince(started) < 10)
        for future in busy { try await future.get() }
    }

    @Test("Text PostgreSQL cannot store (a NUL character) is an error naming the attribute and the object; nothing is saved")
    func nulCharacter() throws {
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self)))
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            context.insert(Book(isbn: "fine", title: "Fine"))
            let bad = Book(isbn: "bad", title: "Nul\u{0}here")
            context.insert(bad)
            let error = try #require(throws: LoomError.self) { try context.save() }
            #expect(error.code == .invalidRequest)
            #expect(error.attributeNames == ["title"])
            #expect(error.message.contains("Book.title"))
            #expect(error.message.contains("NUL"))
            #expect(error.objectID == bad.objectID.erased)
            // Nothing saved; the context keeps its changes to correct.
            let fresh = container.newBackgroundContext()
            #expect(try fresh.performAndWait { try $0.count(for: FetchRequest<Book>()) } == 0)
            bad.title = "No nul here"
            try context.save()
            #expect(try fresh.performAndWait { try $0.count(for: FetchRequest<Book>()) } == 2)
        }
    }

    @Test("A configuration from a URL: TCP, a Unix socket folder, the schema; a URL that is not PostgreSQL's is an error")
    func configurationFromURL() throws {
        let tcp = try PostgreSQLStore.Configuration(url: "postgres://app:secret@db.internal:6543/library?schema=books")
        #expect(tcp.endpoint == .tcp(host: "db.internal", port: 6543))
        #expect(tcp.username == "app")
        #expect(tcp.password == "secret")
        #expect(tcp.database == "library")
        #expect(tcp.schemaName == "books")
        let socket = try PostgreSQLStore.Configuration(url: "postgresql://app@localhost:5433/library?host=/run/postgresql")
        #expect(socket.endpoint == .unixSocket(path: "/run/postgresql/.s.PGSQL.5433"))
        #expect(socket.schemaName == "public")
        let error = try #require(throws: LoomError.self) { try PostgreSQLStore.Configuration(url: "mysql://app@db/library") }
        #expect(error.code == .invalidRequest)
    }

    @Test("A schema holding tables Loom did not make is refused (a model that cannot be migrated to: PostgreSQLMigrationTests)")
    func refusals() async throws {
        let configuration = try PostgresServer.configuration()
        // A schema with a table of someone else's.
        var foreign = configuration
        foreign.schemaName = configuration.schemaName + "_foreign"
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try foreign.connectionConfiguration, id: 1,
            logger: Logger(label: "test"))
        _ = try await connection.query("CREATE SCHEMA \(unescaped: foreign.schemaName)", logger: Logger(label: "test"))
        _ = try await connection.query("CREATE TABLE \(unescaped: foreign.schemaName).invoices (id int)", logger: Logger(label: "test"))
        try await connection.close()
        let refused = try #require(throws: LoomError.self) { try PostgreSQLStore(configuration: foreign, schema: try Schema(Book.self)) }
        #expect(refused.code == .notALoomStore)
        #expect(refused.message.contains("invoices"))
    }

    @Test("A server that is not there is a clear error")
    func unreachable() throws {
        var configuration = try PostgresServer.configuration()
        configuration.endpoint = .unixSocket(path: "/nonexistent/.s.PGSQL.1")
        let error = try #require(throws: LoomError.self) { try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self)) }
        #expect(error.code == .storeFailure)
        #expect(error.message.contains("could not be opened"))
    }
}
