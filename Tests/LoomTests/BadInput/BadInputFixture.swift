import Foundation
import Loom
import LoomPostgreSQL
import Testing

/// A store holding a known set of objects, for the bad-input catalogue's tests
/// (`Sources/Loom/Loom.docc/BadInput.md`): each refuses one kind of bad input, then checks with
/// ``contents()`` that the store holds exactly what it held before.
struct BadInputFixture: Sendable {
    let kind: StoreKind
    let container: PersistentContainer
    /// Opens the same storage again (`nil` for the in-memory store, which ends with its instance):
    /// what a closed container held is read through a new one.
    let reopen: (@Sendable () throws -> any PersistentStore)?
    /// The SQLite store's file, for a SQLite fixture.
    var sqliteURL: URL?
    /// The PostgreSQL store's configuration, for a PostgreSQL fixture.
    var postgresConfiguration: PostgreSQLStore.Configuration?

    static let schema = { try! Schema([Book.self, Shelf.self, Sample.self, Tally.self]) }()

    /// A new store of `kind` holding two books, a shelf, a sample and a tally, in one save.
    static func make(_ kind: StoreKind) async throws -> BadInputFixture {
        let reopen: (@Sendable () throws -> any PersistentStore)?
        let store: any PersistentStore
        var sqliteURL: URL?
        var postgresConfiguration: PostgreSQLStore.Configuration?
        switch kind {
        case .inMemory:
            store = InMemoryStore(schema: schema)
            reopen = nil
        case .sqlite:
            let url = TemporaryDirectory.make().appending(path: "bad-input.loom")
            store = try SQLiteStore(url: url, schema: schema)
            reopen = { try SQLiteStore(url: url, schema: schema) }
            sqliteURL = url
        case .postgres:
            let configuration = try PostgresServer.configuration()
            store = try PostgreSQLStore(configuration: configuration, schema: schema)
            reopen = { try PostgreSQLStore(configuration: configuration, schema: schema) }
            postgresConfiguration = configuration
        }
        let container = PersistentContainer(store: store)
        try await container.performBackgroundTask { context in
            context.insert(Book(isbn: "978-1", title: "Dune", pages: 412))
            context.insert(Book(isbn: "978-2", title: "Emma", pages: 320))
            context.insert(Shelf(room: "hall", position: 1))
            let sample = Sample()
            sample.int = 7
            sample.double = 2.5
            sample.string = "seven"
            context.insert(sample)
            context.insert(Tally(key: "t"))
            try context.save()
        }
        return BadInputFixture(kind: kind, container: container, reopen: reopen, sqliteURL: sqliteURL, postgresConfiguration: postgresConfiguration)
    }

    /// Every object of every entity with its attributes, sorted, and the number of history
    /// transactions: what "nothing changed" compares.
    func contents() async throws -> [String] {
        try await Self.contents(of: container)
    }

    /// ``contents()`` read through a new container on the same storage, for a container that
    /// was closed; the new one is closed again.
    func contentsReopened() async throws -> [String] {
        let reopen = try #require(reopen, "the in-memory store cannot be reopened")
        let container = PersistentContainer(store: try reopen())
        let contents = try await Self.contents(of: container)
        try await container.close()
        return contents
    }

    static func contents(of container: PersistentContainer) async throws -> [String] {
        try await container.performBackgroundTask { context in
            var lines: [String] = []
            for b in try context.fetch(FetchRequest<Book>()) {
                lines.append("Book \(b.objectID) \(b.isbn) \(b.title) \(b.pages) \(String(describing: b.rating)) \(b.genre) \(String(describing: b.published))")
            }
            for s in try context.fetch(FetchRequest<Shelf>()) {
                lines.append("Shelf \(s.objectID) \(s.room) \(s.position) \(String(describing: s.label))")
            }
            for s in try context.fetch(FetchRequest<Sample>()) {
                lines.append("Sample \(s.objectID) \(s.flag) \(s.int) \(s.int16) \(s.int32) \(s.int64) \(s.double) \(s.float) \(s.string) \(s.data) \(s.decimal) \(s.genre) \(String(describing: s.optionalString)) \(String(describing: s.optionalInt))")
            }
            for t in try context.fetch(FetchRequest<Tally>()) {
                lines.append("Tally \(t.objectID) \(t.key) \(t.fields)")
            }
            let history = try context.fetchHistory(HistoryDescriptor()).count
            return lines.sorted() + ["history transactions: \(history)"]
        }
    }

    /// Runs `body`, which must throw a ``LoomError`` of `code` whose message contains each of
    /// `mentions`, and checks that the store holds what it held before. Returns the error.
    @discardableResult
    func expectRefused(
        _ code: LoomError.Code, mentioning mentions: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: @escaping @Sendable (ManagedObjectContext) throws -> Void
    ) async throws -> LoomError? {
        let before = try await contents()
        let error: LoomError? = try await container.performBackgroundTask { context in
            do {
                try body(context)
                return nil
            } catch let error as LoomError {
                return error
            } catch {
                Issue.record("not a LoomError: \(error)", sourceLocation: sourceLocation)
                return nil
            }
        }
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        for mention in mentions {
            #expect(error?.message.contains(mention) == true, "\(String(describing: error)) does not say \(mention)", sourceLocation: sourceLocation)
        }
        #expect(try await contents() == before, "the store changed", sourceLocation: sourceLocation)
        return error
    }
}
