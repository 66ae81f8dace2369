import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@testable import LoomPostgreSQL
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization
import Testing

/// Saves sent as one statement (issue 42, point 6: a single-object save in at most two round
/// trips): the write lock, the change, the commit lock and the history row in one round trip,
/// with the same refusals, history and fallbacks as a save statement by statement. The
/// overlap and gap-free history of such saves from several servers: `PostgreSQLParallelWriteTests`.
@Suite("PostgreSQL one-statement saves", PostgresServer.required, .timeLimit(.minutes(5)))
struct PostgreSQLOneStatementSaveTests {
    typealias Statements = PostgreSQLStoreTests.Statements

    /// Runs `sql` on a connection of its own to the test server, as the store's role unless
    /// `configuration` says otherwise; returns the first column of each row as text.
    @discardableResult
    static func execute(_ sql: String, _ configuration: PostgreSQLStore.Configuration) async throws -> [String?] {
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1, logger: logger)
        do {
            var values: [String?] = []
            for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) {
                values.append(try row.first.map { try $0.decode(String?.self) } ?? nil)
            }
            try await connection.close()
            return values
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Whether a save's statements went as one: no `BEGIN`, no `COMMIT`.
    static func isOneStatement(_ statements: [String]) -> Bool {
        statements.count == 1 && statements[0].hasPrefix("WITH loom_lock") && statements[0].contains("loom_record_commit(")
    }

    @Test("A single-object insert, update and delete are one round trip each (at most two, the issue asks), each committed and in the history once")
    func singleObjectSaves() throws {
        let log = Statements()
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self), trace: log.hook))
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            let book = Book(isbn: "1", title: "One")
            context.insert(book)
            log.reset()
            try context.save()
            #expect(log.saving.count <= 2)
            #expect(Self.isOneStatement(log.saving), "\(log.saving)")

            book.title = "Two"
            log.reset()
            try context.save()
            #expect(Self.isOneStatement(log.saving), "\(log.saving)")

            context.delete(book)
            log.reset()
            try context.save()
            #expect(Self.isOneStatement(log.saving), "\(log.saving)")
        }
        try container.newBackgroundContext().performAndWait { (context) throws in
            #expect(try context.count(for: FetchRequest<Book>()) == 0)
            let history = try context.fetchHistory(HistoryDescriptor())
            #expect(history.map(\.token.transactionNumber) == [1, 2, 3])
            #expect(history.map { $0.changes.count } == [1, 1, 1])
            #expect(history.first?.changes.first?.kind == .insert)
        }
    }

    @Test("A save's statement is prepared once per shape on the writer's connection: later saves of that shape reuse it, another shape adds one, a table changed by another session meanwhile is planned again; off, nothing is prepared")
    func savesArePrepared() async throws {
        for prepares in [true, false] {
            let log = Statements()
            var configuration = try PostgresServer.configuration(trace: log.hook)
            configuration.preparesSaveStatements = prepares
            let store = try PostgreSQLStore(configuration: configuration, schema: try Schema(Book.self))
            let container = PersistentContainer(store: store)
            let context = container.newBackgroundContext()
            let prepared = { store.writer.preparedCount }
            try context.performAndWait { context in
                let book = Book(isbn: "1", title: "One")
                context.insert(book)
                try context.save()
                #expect(prepared() == (prepares ? 1 : 0))
                for i in 0..<6 {   // past the five custom plans PostgreSQL makes before a generic one
                    book.title = "Title \(i)"
                    log.reset()
                    try context.save()
                    #expect(Self.isOneStatement(log.saving), "\(log.saving)")
                }
                #expect(prepared() == (prepares ? 2 : 0))
                book.isbn = "2"
                try context.save()
                #expect(prepared() == (prepares ? 3 : 0))
            }
            // Another session changes the table under the prepared statements.
            try await Self.execute("ALTER TABLE \(configuration.schemaName).\"Book\" ADD COLUMN extra bigint", configuration)
            try context.performAndWait { context in
                let book = try #require(try context.fetch(FetchRequest<Book>()).first)
                book.title = "After"
                try context.save()
                context.insert(Book(isbn: "3", title: "Three"))
                try context.save()
            }
            try container.newBackgroundContext().performAndWait { (context) throws in
                #expect(try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title) == ["After", "Three"])
                #expect(try context.fetchHistory(HistoryDescriptor()).count == 10)
            }
            try await container.close()
        }
    }

    @Test("Saves over several tables — an object with a to-one, a many-to-many link, a cascade of deletes with join rows — are one statement when each table changes once")
    func graphSavesInOneStatement() throws {
        let log = Statements()
        let container = try StoreKind.postgres.makeGraphContainer(trace: log.hook)
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            let author = Author(name: "Ann")
            let tag = Tag(name: "sea")
            context.insert(author)
            context.insert(tag)
            log.reset()
            try context.save()      // two entities: two tables, one statement
            #expect(Self.isOneStatement(log.saving), "\(log.saving)")

            let novel = Novel(title: "Waves", pages: 300, author: author)
            context.insert(novel)
            novel.tags.insert(tag)
            novel.chapters.append(Chapter(title: "I"))
            log.reset()
            try context.save()      // Novel, Chapter and the Novel–Tag join table
            #expect(Self.isOneStatement(log.saving), "\(log.saving)")

            context.delete(novel)   // cascades to the chapter; its join row goes too
            context.processPendingChanges()     // the delete rules' reads of the chapters and reviews
            log.reset()
            try context.save()
            #expect(Self.isOneStatement(log.saving), "\(log.saving)")
        }
        try container.newBackgroundContext().performAndWait { (context) throws in
            #expect(try context.count(for: FetchRequest<Novel>()) == 0)
            #expect(try context.count(for: FetchRequest<Chapter>()) == 0)
            let tag = try #require(try context.fetch(FetchRequest<Tag>()).first)
            #expect(tag.novels.isEmpty)
            #expect(try context.fetchHistory(HistoryDescriptor()).count == 3)
        }
    }

    @Test("A save that changes one table twice (an update freeing a unique value, an insert taking it) goes statement by statement, in order, and succeeds")
    func oneTableTwiceGoesStatementByStatement() throws {
        let log = Statements()
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self), trace: log.hook))
        try container.newBackgroundContext().performAndWait { (context) throws in
            let old = Book(isbn: "x", title: "Old")
            context.insert(old)
            try context.save()
            old.isbn = "y"
            context.insert(Book(isbn: "x", title: "New"))
            log.reset()
            try context.save()
            #expect(log.saving.first == "BEGIN", "\(log.saving)")
            #expect(log.saving.last == "COMMIT")
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
            #expect(books.map(\.isbn) == ["x", "y"])
            #expect(books.map(\.title) == ["New", "Old"])
        }
    }

    @Test("A duplicate in a one-statement save is the same uniqueness error, naming the attribute; nothing is saved, no history row is written, and the next save works")
    func uniquenessRefusal() throws {
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self)))
        try container.newBackgroundContext().performAndWait { (context) throws in
            context.insert(Book(isbn: "taken", title: "First"))
            try context.save()
            let duplicate = Book(isbn: "taken", title: "Again")
            context.insert(duplicate)
            let error = try #require(throws: LoomError.self) { try context.save() }
            #expect(error.code == .uniquenessViolation)
            #expect(error.entityName == "Book")
            #expect(error.attributeNames == ["isbn"])
            #expect(context.inserted.count == 1)
            context.delete(duplicate)
            context.insert(Book(isbn: "free", title: "Second"))
            try context.save()
        }
        try container.newBackgroundContext().performAndWait { (context) throws in
            #expect(try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title) == ["Second", "First"])
            #expect(try context.fetchHistory(HistoryDescriptor()).map(\.token.transactionNumber) == [1, 2])
        }
    }

    @Test("A stale update or delete in a one-statement save is a version conflict naming the object, as statement by statement; the store and the history are unchanged")
    func versionConflictRefusal() throws {
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self)))
        let id = try container.newBackgroundContext().performAndWait { (context) throws in
            let book = Book(isbn: "1", title: "First")
            context.insert(book)
            try context.save()
            return book.objectID
        }
        let stale = container.newBackgroundContext()
        try stale.performAndWait { try $0.existingObject(with: id).title = "Stale" }
        try container.newBackgroundContext().performAndWait { (context) throws in
            try context.existingObject(with: id).title = "Newer"
            try context.save()
        }
        for deleting in [false, true] {
            try stale.performAndWait { context in
                if deleting { context.delete(try context.existingObject(with: id)) }
                let error = try #require(throws: LoomError.self) { try context.save() }
                #expect(error.code == .versionConflict)
                #expect(error.conflicts.map(\.objectID) == [id.erased])
                #expect(context.hasChanges)
            }
        }
        try container.newBackgroundContext().performAndWait { (context) throws in
            #expect(try context.existingObject(with: id).title == "Newer")
            #expect(try context.fetchHistory(HistoryDescriptor()).count == 2)
        }
    }

    @Test("Values are bound, never SQL: text that looks like SQL, a placeholder or the function's quote is saved and read back as it was")
    func valuesAreNeverSQL() throws {
        let container = PersistentContainer(store: try PostgresServer.makeStore(try Schema(Book.self)))
        let texts = ["'); DROP TABLE \"Book\"; --", "$1 $2::int8[]", "$loom$ END $loom$; SELECT 1", "\\x00 ' \" ;"]
        try container.newBackgroundContext().performAndWait { (context) throws in
            for (i, text) in texts.enumerated() {
                context.insert(Book(isbn: text, title: text, pages: i))
                try context.save()
            }
        }
        try container.newBackgroundContext().performAndWait { (context) throws in
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.pages)]))
            #expect(books.map(\.isbn) == texts)
            #expect(books.map(\.title) == texts)
        }
    }

    @Test("Without history a single-object save is still one statement, and writes no history row")
    func withoutHistory() throws {
        let log = Statements()
        let container = PersistentContainer(store: try PostgreSQLStore(configuration: try PostgresServer.configuration(trace: log.hook, recordsHistory: false), schema: try Schema(Book.self)))
        try container.newBackgroundContext().performAndWait { (context) throws in
            context.insert(Book(isbn: "1", title: "One"))
            log.reset()
            try context.save()
            #expect(Self.isOneStatement(log.saving), "\(log.saving)")
            #expect(try context.count(for: FetchRequest<Book>()) == 1)
            #expect(try context.currentHistoryToken() == nil)
        }
    }

    @Test("A store made without loom_record_commit, or with another version of it, opens: the function is added or replaced, and saves are one statement again")
    func existingStoreGetsTheFunction() async throws {
        let log = Statements()
        let configuration = try PostgresServer.configuration(trace: log.hook)
        let schema = try Schema(Book.self)
        let function = "\"\(configuration.schemaName)\".loom_record_commit"
        let first = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        try await first.save { $0.insert(Book(isbn: "1", title: "Before")) }
        try await first.close()

        try await Self.execute("DROP FUNCTION \(function)", configuration)
        let second = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        log.reset()
        try await second.save { $0.insert(Book(isbn: "2", title: "Added")) }
        #expect(Self.isOneStatement(log.saving), "\(log.saving)")
        try await second.close()

        // Another release's function of the same name and parameters: replaced when the store opens.
        try await Self.execute("""
            CREATE OR REPLACE FUNCTION \(function)(changed bigint[], expected bigint[], commit_lock bigint, \
            pause_before_history double precision, pause_before_commit double precision, history_timestamp double precision, \
            history_origin bigint, history_origincommit bigint, history_author text, history_context text, history_process bigint, \
            history_processname text, history_entities text, history_changes bytea) RETURNS bigint LANGUAGE plpgsql VOLATILE \
            AS $$ BEGIN RAISE EXCEPTION 'another release'; END $$
            """, configuration)
        let third = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        log.reset()
        try await third.save { $0.insert(Book(isbn: "3", title: "Replaced")) }
        #expect(Self.isOneStatement(log.saving), "\(log.saving)")
        let history = try await third.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()) }
        #expect(history.map(\.token.transactionNumber) == [1, 2, 3])
        try await third.close()
    }

    @Test("A one-statement save deleting an object waits for another server's exclusive write that links it, and then deletes that new link too: no join row outlives the object", .ownThreads)
    func deletionAfterExclusiveWriteDeletesItsLinks() async throws {
        let configuration = try PostgresServer.configuration()
        let schema = try Schema(StoreKind.graphTypes)
        let first = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        let log = Statements()
        var tracing = configuration
        tracing.trace = log.hook
        let second = PersistentContainer(store: try PostgreSQLStore(configuration: tracing, schema: schema))
        let novelID = try await first.performBackgroundTask { context in
            let novel = Novel(title: "Waves")
            context.insert(novel)
            context.insert(Tag(name: "sea"))
            try context.save()
            return novel.objectID
        }
        let deleter = second.newBackgroundContext()
        try deleter.performAndWait { context in context.delete(try context.existingObject(with: novelID)) }
        let linked = LinkedFlag()
        let exclusive = Task(executorPreference: OwnThreadsExecutor.shared) { () throws in
            try await first.performExclusiveWrite { context in
                let tag = try #require(try context.fetch(FetchRequest<Tag>()).first)
                try context.existingObject(with: novelID).tags.insert(tag)
                try context.save()
                linked.value.store(true, ordering: .releasing)
                Thread.sleep(forTimeInterval: 0.3)
            }
        }
        while !linked.value.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(1)) }
        log.reset()
        try deleter.performAndWait { try $0.save() }
        try await exclusive.value
        #expect(Self.isOneStatement(log.saving), "\(log.saving)")
        let quoted = "\"\(configuration.schemaName)\""
        let joinTables = try await Self.execute("SELECT table_name::text FROM information_schema.columns WHERE table_schema = '\(configuration.schemaName)' AND column_name = 'Z_SOURCE'", configuration)
        try #require(!joinTables.isEmpty)
        for table in joinTables.compactMap({ $0 }) {
            #expect(try await Self.execute("SELECT count(*)::text FROM \(quoted).\"\(table)\"", configuration) == ["0"], "a row of \(table) outlived its object")
        }
        #expect(try await first.performBackgroundTask { try $0.count(for: FetchRequest<Novel>()) } == 0)
        try await first.close()
        try await second.close()
    }

    @Test("A role that may not create functions in the store's schema still opens a store without the function; its saves go statement by statement and work")
    func roleWithoutCreate() async throws {
        let log = Statements()
        let owner = try PostgresServer.configuration()
        let schema = try Schema(Book.self)
        let made = PersistentContainer(store: try PostgreSQLStore(configuration: owner, schema: schema))
        try await made.save { $0.insert(Book(isbn: "1", title: "By the owner")) }
        try await made.close()
        let role = "loom_limited_" + owner.schemaName.suffix(12)
        let quoted = "\"\(owner.schemaName)\""
        try await Self.execute("DROP FUNCTION \(quoted).loom_record_commit", owner)
        try await Self.execute("CREATE ROLE \(role) LOGIN", owner)
        try await Self.execute("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO \(role)', current_database()); END $$", owner)
        try await Self.execute("GRANT USAGE ON SCHEMA \(quoted) TO \(role)", owner)
        try await Self.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(quoted) TO \(role)", owner)
        var limited = owner
        limited.username = role
        limited.trace = log.hook
        do {
            let container = PersistentContainer(store: try PostgreSQLStore(configuration: limited, schema: schema))
            log.reset()
            try await container.save { $0.insert(Book(isbn: "2", title: "By the limited role")) }
            #expect(log.saving.first == "BEGIN", "\(log.saving)")
            #expect(log.saving.last == "COMMIT")
            let titles = try await container.performBackgroundTask { try $0.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title) }
            #expect(titles == ["By the owner", "By the limited role"])
            try await container.close()
        } catch {
            Issue.record(error)
        }
        try await Self.execute("DROP OWNED BY \(role)", owner)
        try await Self.execute("DROP ROLE \(role)", owner)
    }
}

/// Set once by the exclusive write, read by the test.
private final class LinkedFlag: Sendable {
    let value = Atomic<Bool>(false)
}
