import Foundation
import Loom
import Observation
import Synchronization
import Testing

/// `@Model` objects are `Observable`: `withObservationTracking` hears of a property's changes,
/// wherever they come from, and of nothing else.
@MainActor
@Suite("Observable models")
struct ObservableModelTests {
    /// How many times an observation's `onChange` ran.
    final class Changes: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func record() { count.withLock { $0 += 1 } }
    }

    /// Observes what `read` reads, once.
    func observe(_ read: () -> Void) -> Changes {
        let changes = Changes()
        withObservationTracking(read) { changes.record() }
        return changes
    }

    /// Saves a book in the view context, lets `prepare` edit it, observes its title and its
    /// pages, then runs `change`: how many times each observation heard of a change.
    func heard(
        on kind: StoreKind, prepare: (Book) -> Void = { _ in },
        _ change: @MainActor (Book, PersistentContainer) async throws -> Void
    ) async throws -> (title: Int, pages: Int) {
        let container = try kind.makeContainer()
        let book = Book(isbn: "1", title: "Threads", pages: 100)
        container.viewContext.insert(book)
        try container.viewContext.save()
        prepare(book)
        let title = observe { _ = book.title }
        let pages = observe { _ = book.pages }
        try await change(book, container)
        return (title.value, pages.value)
    }

    @Test("Setting a property in the object's context tells its observers", arguments: StoreKind.allCases)
    func settingTellsObservers(kind: StoreKind) async throws {
        let heard = try await heard(on: kind) { book, _ in book.title = "Threads, revised" }
        #expect(heard == (1, 0))
    }

    @Test("A background save merged into the view context tells the observers of the properties it changed", arguments: StoreKind.allCases)
    func mergedChangeTellsObservers(kind: StoreKind) async throws {
        let heard = try await heard(on: kind) { book, container in
            let id = book.objectID
            try await container.performBackgroundTask { context in
                try context.existingObject(with: id).title = "Threads, merged"
                try context.save()
            }
            try await settle { book.title == "Threads, merged" }   // merged automatically
        }
        #expect(heard == (1, 0))
    }

    @Test("A merge that changes only another attribute tells the title's observers nothing", arguments: StoreKind.allCases)
    func mergeOfAnotherAttributeIsSilent(kind: StoreKind) async throws {
        let heard = try await heard(on: kind) { book, container in
            let id = book.objectID
            try await container.save { context in
                let theirs = try context.existingObject(with: id)
                theirs.pages = 200
                theirs.title = "Threads"   // set, but to the value it had
            }
            #expect(book.pages == 200)
        }
        #expect(heard == (0, 1))
    }

    @Test("A merged change under a local edit of the same attribute tells no one: the edit stays on top", arguments: StoreKind.allCases)
    func mergeUnderALocalEditIsSilent(kind: StoreKind) async throws {
        let heard = try await heard(on: kind, prepare: { $0.title = "Mine" }) { book, container in
            let id = book.objectID
            try await container.save { context in try context.existingObject(with: id).title = "Theirs" }
            #expect(book.title == "Mine")
        }
        #expect(heard == (0, 0))
    }

    @Test("A fault firing tells no one, nor does a refresh that finds the same values", arguments: StoreKind.allCases)
    func faultFiringIsSilent(kind: StoreKind) async throws {
        let heard = try await heard(on: kind, prepare: { book in
            try! book.managedObjectContext!.refresh(book, mergeChanges: false)
            #expect(book.isFault)                       // observing fires the fault
        }) { book, container in
            #expect(!book.isFault)
            try container.viewContext.refresh(book, mergeChanges: false)
            _ = book.isbn                               // fires it again
        }
        #expect(heard == (0, 0))
    }

    @Test("Refreshing tells the observers of the properties the store changed", arguments: StoreKind.allCases)
    func refreshTellsObservers(kind: StoreKind) async throws {
        let heard = try await heard(on: kind) { book, container in
            let id = book.objectID
            try await container.save(mergingIntoViewContext: false) { context in
                try context.existingObject(with: id).title = "Threads, elsewhere"
            }
            #expect(book.title == "Threads")
            try container.viewContext.refresh(book, mergeChanges: true)
            #expect(book.title == "Threads, elsewhere")
        }
        #expect(heard == (1, 0))
    }

    @Test("Rolling back tells the observers of each property that gets its saved value back", arguments: StoreKind.allCases)
    func rollbackTellsObservers(kind: StoreKind) async throws {
        let heard = try await heard(on: kind, prepare: { $0.title = "Unsaved" }) { book, container in
            container.viewContext.rollback()
            #expect(book.title == "Threads")
        }
        #expect(heard == (1, 0))
    }

    @Test("A to-many relationship's observers hear of a member added by a merge", arguments: StoreKind.allCases)
    func mergedMemberTellsToManyObservers(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let view = container.viewContext
        let author = Author(name: "Le Guin")
        view.insert(author)
        try view.save()
        let id = author.objectID
        let novels = observe { _ = author.novels }
        let name = observe { _ = author.name }
        try await container.performBackgroundTask { context in
            _ = Novel(title: "The Dispossessed", author: try context.existingObject(with: id))
            try context.save()
        }
        try await settle { novels.value > 0 }
        #expect(author.novels.map(\.title) == ["The Dispossessed"])
        #expect(name.value == 0)
    }

    @Test("Setting a to-one relationship tells the observers of the inverse to-many on both ends", arguments: StoreKind.allCases)
    func inverseTellsObservers(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let view = container.viewContext
        let first = Author(name: "First"), second = Author(name: "Second")
        let novel = Novel(title: "Moved")
        [first, second].forEach(view.insert)
        novel.author = first
        try view.save()
        let firstNovels = observe { _ = first.novels }
        let secondNovels = observe { _ = second.novels }
        let firstName = observe { _ = first.name }
        novel.author = second
        #expect(firstNovels.value == 1)
        #expect(secondNovels.value == 1)
        #expect(firstName.value == 0)
    }

    @Test("An object never read has no registrar: nothing can observe it, and changes tell no one", arguments: StoreKind.allCases)
    func unreadObjectsAreNotObserved(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        view.insert(Book(isbn: "1", title: "Threads"))
        try view.save()
        view.reset()
        let fetched = try view.fetch(FetchRequest<Book>())
        #expect(fetched.allSatisfy { !$0._loomMayBeObserved })
        withObservationTracking { _ = fetched[0].title } onChange: {}
        #expect(fetched[0]._loomMayBeObserved)
    }
}
