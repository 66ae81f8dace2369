import Foundation
import Loom
import Testing

/// A fetch with a window (`fetchLimit`, `fetchOffset`) over an entity with unsaved changes reads
/// only what the window and the changed objects need, and still answers exactly.
@MainActor
@Suite("Fetch windows over unsaved changes")
struct FetchWindowTests {
    func makeContainer(_ kind: StoreKind, books: Int) throws -> (PersistentContainer, CountingStore) {
        let (container, store) = try kind.makeCountingContainer()
        try container.newBackgroundContext().performAndWait { context in
            for i in 0..<books { context.insert(Book(isbn: String(format: "%06d", i), title: "Book \(i)", pages: i)) }
            try context.save()
        }
        return (container, store)
    }

    @Test("A limit of 20 with one dirty object reads about 20 rows, not the whole entity", arguments: StoreKind.allCases)
    func limitReadsOnlyTheWindow(kind: StoreKind) throws {
        let (container, store) = try makeContainer(kind, books: 20_000)
        let context = container.viewContext
        let dirty = try #require(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages == 500 })).first)
        dirty.pages = -1   // moves to the front of the order
        context.insert(Book(isbn: "new", title: "New", pages: 3))
        store.reset()

        var request = FetchRequest<Book>(sortBy: [SortDescriptor(\.pages)])
        request.fetchLimit = 20
        request.fetchOffset = 5
        let pages = try context.fetch(request).map(\.pages)

        #expect(pages == [3] + Array(4...22))   // -1, 0, 1, 2, 3 come first; the new 3 sorts after the saved one
        #expect(store.rowsFetched <= 5 + 20 + 2)
    }

    @Test("Windows over unsaved changes agree with a fetch of everything, for every offset", arguments: StoreKind.allCases)
    func windowsAgreeWithTheWholeResult(kind: StoreKind) throws {
        let (container, _) = try makeContainer(kind, books: 60)
        let context = container.viewContext
        let all = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.pages)]))
        // Deleted, moved up, moved down, moved out of the predicate, and new ones.
        context.delete(all[3])
        all[40].pages = 1
        all[2].pages = 70
        all[10].title = "Changed"
        all[11].pages = 1_000
        for i in 0..<4 { context.insert(Book(isbn: "n\(i)", title: "New \(i)", pages: 15 * i)) }

        let predicate = #Predicate<Book> { $0.pages < 500 }
        let whole = try context.fetch(FetchRequest<Book>(predicate: predicate, sortBy: [SortDescriptor(\.pages, order: .reverse)])).map(\.isbn)
        for offset in stride(from: 0, through: whole.count + 2, by: 3) {
            var request = FetchRequest<Book>(predicate: predicate, sortBy: [SortDescriptor(\.pages, order: .reverse)])
            request.fetchOffset = offset
            request.fetchLimit = 7
            let window = try context.fetch(request).map(\.isbn)
            #expect(window == Array(whole.dropFirst(offset).prefix(7)), "offset \(offset)")
        }
    }
}
