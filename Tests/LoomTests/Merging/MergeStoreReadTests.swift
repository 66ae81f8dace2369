import Foundation
import Loom
import LoomPostgreSQL
import Synchronization
import Testing

/// Saves arrive with the rows the merging contexts need, read or built once, off every context:
/// the view context merges another coordinator's commit and a batch request without a single
/// store statement on the main actor.
@Suite("Merging reads nothing on the merging context", .timeLimit(.minutes(5)))
struct MergeStoreReadTests {
    /// Counts the statements a store runs in jobs of the main queue, where the main actor runs
    /// (whichever thread drains it: under the test runner, not always the main thread).
    final class MainThreadStatements: Sendable {
        private static let mainQueue = DispatchSpecificKey<Bool>()
        private let counted = Atomic<Int>(0)
        var count: Int { counted.load(ordering: .relaxed) }
        func reset() { counted.store(0, ordering: .relaxed) }
        @MainActor init() { DispatchQueue.main.setSpecific(key: Self.mainQueue, value: true) }
        var hook: @Sendable (String) -> Void {
            { [self] _ in if DispatchQueue.getSpecific(key: Self.mainQueue) == true { counted.add(1, ordering: .relaxed) } }
        }
    }

    /// Two containers on one store (a file, or a PostgreSQL schema); the second's statements
    /// on the main actor are counted in `reads`.
    @MainActor
    static func twoContainers(_ kind: StoreKind) throws -> (writer: PersistentContainer, reader: PersistentContainer, reads: MainThreadStatements) {
        let schema = try Schema([Book.self])
        let reads = MainThreadStatements()
        switch kind {
        case .sqlite:
            let url = TemporaryDirectory.make().appending(path: "shared.loom")
            let writer = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
            return (writer, PersistentContainer(store: try SQLiteStore(url: url, schema: schema, options: .init(trace: reads.hook))), reads)
        case .postgres:
            var configuration = try PostgresServer.configuration()
            let writer = PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
            configuration.trace = reads.hook
            return (writer, PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema)), reads)
        case .inMemory:
            throw LoomError(.invalidRequest, "An in-memory store has one coordinator.")
        }
    }

    /// Saves three books through `writer`, waits until `view` sees them, and loads them there
    /// (a fault would read its row when used); then counts from zero.
    @MainActor
    static func loadThreeBooks(savedBy writer: PersistentContainer, into view: ManagedObjectContext, counting reads: MainThreadStatements) async throws -> [Book] {
        try await writer.save { context in
            for i in 0..<3 { context.insert(Book(isbn: "\(i)", title: "T\(i)")) }
        }
        try await settle { try view.count(for: FetchRequest<Book>()) == 3 }
        let books = try view.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
        #expect(books.map(\.pages) == [0, 0, 0])
        #expect(reads.count > 0)   // the counter sees what the main actor reads
        reads.reset()
        return books
    }

    @Test("Another coordinator's commit merges into the view context, and into its live query, with no store statement on the main actor",
          arguments: StoreKind.persistentCases)
    @MainActor
    func remoteCommitMergesWithoutReadingOnTheMainActor(kind: StoreKind) async throws {
        let (writer, reader, reads) = try Self.twoContainers(kind)
        let view = reader.viewContext
        let shelf = try LiveResultsObserver(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]), in: view)
        let books = try await Self.loadThreeBooks(savedBy: writer, into: view, counting: reads)

        try await writer.save { context in
            for book in try context.fetch(FetchRequest<Book>()) { book.pages = 42 }
            context.insert(Book(isbn: "3", title: "T3"))
        }
        try await settle { books.allSatisfy { $0.pages == 42 } && shelf.results.count == 4 }
        #expect(books.allSatisfy { !$0.isFault })
        #expect(reads.count == 0)
        try await reader.close()
        try await writer.close()
    }

    @Test("A batch update run by a background context merges into the view context with no store statement on the main actor",
          arguments: StoreKind.persistentCases)
    @MainActor
    func batchUpdateMergesWithoutReadingOnTheMainActor(kind: StoreKind) async throws {
        let (writer, container, reads) = try Self.twoContainers(kind)
        try await writer.close()
        let books = try await Self.loadThreeBooks(savedBy: container, into: container.viewContext, counting: reads)

        let updated = try await container.performBackgroundTask { context in
            try context.execute(BatchUpdateRequest<Book>(set: [.set(\.pages, to: 7)])).updatedCount
        }
        #expect(updated == 3)
        try await settle { books.allSatisfy { $0.pages == 7 } }
        #expect(books.allSatisfy { !$0.isFault })
        #expect(reads.count == 0)
        try await container.close()
    }

    @Test("A local save's didSave payload merged by hand into a main-queue context carries its rows: no store statement on the main actor",
          arguments: StoreKind.persistentCases)
    @MainActor
    func didSavePayloadMergesWithoutReading(kind: StoreKind) async throws {
        let (writer, container, reads) = try Self.twoContainers(kind)
        try await writer.close()
        let view = container.viewContext
        view.automaticallyMergesChanges = false
        let books = try await Self.loadThreeBooks(savedBy: container, into: view, counting: reads)

        let payload = try await Self.saveAndCapture(in: container) { context in
            for book in try context.fetch(FetchRequest<Book>()) { book.pages = 42 }
            context.insert(Book(isbn: "3", title: "T3"))
        }
        #expect(books.allSatisfy { $0.pages == 0 })   // not merged yet
        reads.reset()
        view.mergeChanges(fromContextDidSave: payload)
        #expect(books.allSatisfy { !$0.isFault && $0.pages == 42 })
        #expect(reads.count == 0)
        try await container.close()
    }

    @Test("Two didSave payloads joined by hand merge both saves: the rows one carries are not taken for all", arguments: StoreKind.allCases)
    @MainActor
    func joinedPayloadsMergeBothSaves(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        view.automaticallyMergesChanges = false
        view.insert(Book(isbn: "1", title: "One"))
        view.insert(Book(isbn: "2", title: "Two"))
        try view.save()
        let books = try view.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
        #expect(books.map(\.pages) == [0, 0])
        var joined = try await Self.saveAndCapture(in: container) { context in
            try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "1" })).first?.pages = 1
        }
        let second = try await Self.saveAndCapture(in: container) { context in
            try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "2" })).first?.pages = 2
        }
        joined.updated.formUnion(second.updated)
        joined.changedProperties.merge(second.changedProperties) { $0.union($1) }
        view.mergeChanges(fromContextDidSave: joined)
        #expect(books.map(\.pages) == [1, 2])
        try await container.close()
    }

    /// Runs `changes` in a background context and saves it: the save's `didSave` payload.
    static func saveAndCapture(in container: PersistentContainer, _ changes: @escaping @Sendable (ManagedObjectContext) throws -> Void) async throws -> ObjectChanges {
        try await container.performBackgroundTask { context in
            var saved = ObjectChanges()
            let token = context.addObserver(for: .didSave) { if case .didSave(let c) = $0 { saved = c } }
            try changes(context)
            try context.save()
            context.removeObserver(token)
            return saved
        }
    }
}
