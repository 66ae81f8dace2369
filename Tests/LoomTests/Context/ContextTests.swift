import Foundation
import Loom
import Testing

@Suite("Contexts and isolation", .timeLimit(.minutes(5)))
struct ContextTests {
    @Test("performBackgroundTask returns Sendable IDs that resolve in the view context", arguments: StoreKind.allCases)
    func backgroundTaskReturnsIDs(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let id: ObjectID<Book> = try await container.performBackgroundTask { context in
            let book = Book(context: context)
            book.isbn = "978-0"
            book.title = "Threads"
            try context.save()
            return book.objectID
        }
        let title = try await MainActor.run {
            try container.viewContext.existingObject(with: id).title
        }
        #expect(title == "Threads")
    }

    @Test("Background contexts run their work on their own queue, off the main thread")
    func runsOffMain() async throws {
        let container = try StoreKind.inMemory.makeContainer()
        let background = container.newBackgroundContext(name: "importer")
        let onMain = await background.perform { _ in Thread.isMainThread }
        #expect(!onMain)
    }

    @Test("performAndWait is reentrant and serializes with perform")
    func performAndWaitReentrant() async throws {
        let container = try StoreKind.inMemory.makeContainer()
        let background = container.newBackgroundContext()
        let nested = try background.performAndWait { context in
            let book = Book(context: context)
            book.isbn = "1"; book.title = "Outer"
            // Reentrant: runs at once on the same queue instead of deadlocking.
            let inner = background.performAndWait { $0.hasChanges }
            try context.save()
            return inner
        }
        #expect(nested)

        // Many concurrent performs are serialized: every increment lands.
        try await background.perform { context in
            let book = Book(context: context)
            book.isbn = "counter"; book.title = "0"; book.pages = 0
            try context.save()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await background.perform { context in
                        let book = try #require(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "counter" })).first)
                        book.pages += 1
                        try context.save()
                    }
                }
            }
            try await group.waitForAll()
        }
        let pages = try await background.perform { context in
            try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "counter" })).first?.pages
        }
        #expect(pages == 50)
    }

    @Test("Contexts are independent scratchpads over one coordinator", arguments: StoreKind.allCases)
    func independentContexts(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let a = container.newBackgroundContext(name: "a")
        let b = container.newBackgroundContext(name: "b")
        let seenByA = try await a.perform { context throws -> Int in
            context.insert(Book(isbn: "1", title: "Unsaved in a"))
            return try context.count(for: FetchRequest<Book>())
        }
        #expect(seenByA == 1)
        #expect(try await b.perform { try $0.count(for: FetchRequest<Book>()) } == 0)
        try await a.perform { try $0.save() }
        #expect(try await b.perform { try $0.count(for: FetchRequest<Book>()) } == 1)
    }

    @Test("Concurrent background saves of distinct objects all land", arguments: StoreKind.allCases)
    func concurrentSaves(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        try await withThrowingTaskGroup(of: [ObjectID<Book>].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    try await container.performBackgroundTask { context in
                        var ids: [ObjectID<Book>] = []
                        for i in 0..<100 {
                            let book = Book(isbn: "\(worker)-\(i)", title: "w\(worker)")
                            context.insert(book)
                            ids.append(book.objectID)
                            if i.isMultiple(of: 25) { try context.save() }
                        }
                        try context.save()
                        return ids
                    }
                }
            }
            var all: Set<ObjectID<Book>> = []
            for try await ids in group { all.formUnion(ids) }
            #expect(all.count == 400)
        }
        let count = try await container.performBackgroundTask { try $0.count(for: FetchRequest<Book>()) }
        #expect(count == 400)
    }

    @Test("Many contexts fetching and watching empty results at once share no memory (run under ThreadSanitizer)")
    func concurrentEmptyResults() async throws {
        // Empty results used to be built through `Array(unsafeUninitializedCapacity: 0)`, which
        // writes the count into the empty-array storage every empty array shares: a data race
        // between contexts that ThreadSanitizer reports.
        let container = try StoreKind.sqlite.makeContainer()
        let none = FetchRequest<Book>(predicate: #Predicate { $0.pages < 0 })
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    let context = container.newBackgroundContext(name: "empty \(worker)")
                    let (found, live) = try await context.perform { context in
                        var found = 0
                        for _ in 0..<200 {
                            found += try context.fetch(none).count
                            found += try context.fetchIDs(none).count
                        }
                        return (found, try context.liveQuery(none))
                    }
                    var iterator = live.makeAsyncIterator()
                    let first = try #require(try await iterator.next())
                    return found + first.count
                }
            }
            var counts: [Int] = []
            for try await count in group { counts.append(count) }
            return counts
        }
        #expect(counts == Array(repeating: 0, count: 8))
    }

    @Test("The view context belongs to the main actor")
    @MainActor func viewContextOnMain() throws {
        let container = try StoreKind.inMemory.makeContainer()
        #expect(container.viewContext === container.viewContext)
        #expect(container.viewContext.name == "view context")
    }
}
