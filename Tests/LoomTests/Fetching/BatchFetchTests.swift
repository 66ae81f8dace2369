import Foundation
import Loom
import Testing

/// Batched fetches (`fetch(_:batchSize:)`): keys now, rows a batch at a time, memory flat.
@MainActor
@Suite("Batched fetches")
struct BatchFetchTests {
    /// A container whose store counts what it is asked, over a store of `kind`.
    func makeContainer(_ kind: StoreKind, log: StatementLog? = nil) throws -> (PersistentContainer, CountingStore) {
        try kind.makeCountingContainer(log: log)
    }

    func populate(_ container: PersistentContainer, count: Int) throws {
        try container.newBackgroundContext().performAndWait { context in
            for i in 0..<count { context.insert(Book(isbn: String(format: "%05d", i), title: "Book \(i)", pages: (i * 7919) % 1000)) }
            try context.save()
        }
    }

    @Test("5,000 objects in batches of 100: one query for the keys, one per batch, few objects alive", arguments: StoreKind.allCases)
    func iterate(kind: StoreKind) throws {
        let log = StatementLog()
        let (container, store) = try makeContainer(kind, log: log)
        try populate(container, count: 5000)
        let context = container.viewContext
        let request = FetchRequest<Book>(sortBy: [SortDescriptor(\.pages), SortDescriptor(\.title)])
        let expected = try context.fetchIDs(request)
        #expect(context.registeredObjects.isEmpty)

        store.reset()
        log.reset()
        let books = try context.fetch(request, batchSize: 100)
        #expect(books.count == 5000)
        #expect(store.counts == .init(fetchKeys: 1))
        var ids: [ObjectID<Book>] = []
        var mostAlive = 0
        for (i, book) in books.enumerated() {
            #expect(!book.isFault)
            ids.append(book.objectID)
            if i % 50 == 0 { mostAlive = max(mostAlive, context.registeredObjects.count) }
        }
        #expect(ids == expected)
        #expect(store.counts == .init(fetchKeys: 1, rows: 50))
        #expect(mostAlive <= 200)
        if kind == .sqlite { #expect(log.selects.count == 51) }

        // Random access loads only the batch that holds the element.
        store.reset()
        #expect(books[4321].objectID == expected[4321])
        #expect(books[4399].objectID == expected[4399])
        #expect(store.counts == .init(rows: 1))
        #expect(books.objectIDs == expected)
    }

    @Test("A batched fetch returns what a fetch returns: predicate, sort, window", arguments: StoreKind.allCases)
    func sameAsFetch(kind: StoreKind) throws {
        let (container, _) = try makeContainer(kind)
        try populate(container, count: 700)
        let context = container.viewContext
        var request = FetchRequest<Book>(predicate: #Predicate { $0.pages < 500 }, sortBy: [SortDescriptor(\.title, order: .reverse)])
        request.fetchOffset = 10
        request.fetchLimit = 250
        let fetched = try context.fetch(request)
        for size in [0, 1, 7, 100, 1000] {
            let batched = try context.fetch(request, batchSize: size)
            #expect(batched.count == fetched.count)
            #expect(batched.map(\.objectID) == fetched.map(\.objectID))
            #expect(zip(batched, fetched).allSatisfy { $0 === $1 })   // one instance per object
        }
    }

    @Test("Unsaved inserts and deletions are honoured; inserted objects are the registered instances", arguments: StoreKind.allCases)
    func pendingChanges(kind: StoreKind) throws {
        let (container, _) = try makeContainer(kind)
        try populate(container, count: 300)
        let context = container.viewContext
        let request = FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])
        let all = try context.fetch(request)
        for book in all where book.pages < 100 { context.delete(book) }
        let fresh = (0..<30).map { Book(isbn: "new-\($0)", title: "New \($0)", pages: $0) }
        for book in fresh { context.insert(book) }
        all[5].title = "Changed"

        let fetched = try context.fetch(request)
        let batched = try context.fetch(request, batchSize: 25)
        #expect(batched.map(\.objectID) == fetched.map(\.objectID))
        #expect(batched.count == 300 - all.filter(\.isDeleted).count + 30)
        #expect(fresh.allSatisfy { book in batched.contains { $0 === book } })
        #expect(batched.contains { $0.title == "Changed" })
        #expect(!batched.contains { $0.isDeleted })

        var storeOnly = request
        storeOnly.includesPendingChanges = false
        #expect(try context.fetch(storeOnly, batchSize: 25).count == 300)
    }

    @Test("An object whose row was deleted elsewhere before its batch loads reads as deleted")
    func rowGoneBeforeItsBatch() async throws {
        // Deleted through a second container on the same file: this coordinator never hears of it.
        let url = TemporaryDirectory.make().appending(path: "batches.loom")
        let container = try PersistentContainer(name: "A", for: Book.self, location: .file(url))
        try populate(container, count: 30)
        let context = container.viewContext
        let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]), batchSize: 10)
        #expect(books[0].title == "Book 0")                  // loads the first batch only
        let other = try PersistentContainer(name: "B", for: Book.self, location: .file(url))
        try await other.save { writer in
            let gone = try writer.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "00025" }))
            writer.delete(try #require(gone.first))
        }
        let title = books[25].title                          // its batch loads without that row
        #expect(books[25].isDeleted && title == "")
        #expect(books[26].title == "Book 26")
    }

    @Test("A negative batch size is an error; 0 loads everything at once", arguments: StoreKind.allCases)
    func batchSizes(kind: StoreKind) throws {
        let (container, store) = try makeContainer(kind)
        try populate(container, count: 120)
        let context = container.viewContext
        let error = try #require(throws: LoomError.self) { try context.fetch(FetchRequest<Book>(), batchSize: -1) }
        #expect(error.code == .invalidRequest)
        store.reset()
        let all = try context.fetch(FetchRequest<Book>(), batchSize: 0)
        #expect(all.map(\.title).count == 120)
        #expect(store.counts == .init(fetchKeys: 1, rows: 1))
        let empty = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages < 0 }), batchSize: 0)
        #expect(empty.isEmpty)
    }

    @Test("Prefetching applies to each batch")
    func prefetchPerBatch() throws {
        let log = StatementLog()
        let container = try StoreKind.sqlite.makeGraphContainer(trace: log.hook)
        try container.newBackgroundContext().performAndWait { context in
            for i in 0..<300 { context.insert(Novel(title: "N\(i)", pages: i, author: Author(name: "A\(i)"))) }
            try context.save()
        }
        let context = container.viewContext
        var request = FetchRequest<Novel>(sortBy: [SortDescriptor(\.pages)])
        request.relationshipKeyPathsForPrefetching = [\.author]
        log.reset()
        var names = 0
        for novel in try context.fetch(request, batchSize: 100) { names += novel.author?.name.count ?? 0 }
        #expect(names > 0)
        #expect(log.selects.count == 1 + 3 + 3)   // keys, then per batch: its novels and their authors
    }
}
