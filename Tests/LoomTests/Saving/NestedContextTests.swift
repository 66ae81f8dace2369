import Foundation
import Loom
import Testing

@MainActor
@Suite("Nested contexts", .timeLimit(.minutes(5)))
struct NestedContextTests {
    @Test("A child sees its parent's unsaved changes, and its save pushes one level up", arguments: StoreKind.allCases)
    func childOfViewContext(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        let kept = Book(isbn: "1", title: "Kept", pages: 10), doomed = Book(isbn: "2", title: "Doomed")
        [kept, doomed].forEach(view.insert)
        try view.save()
        // Unsaved in the parent: an insert, an edit, a deletion.
        let draft = Book(isbn: "3", title: "Draft", pages: 30)
        view.insert(draft)
        kept.pages = 11
        view.delete(doomed)
        let draftID = draft.objectID, keptID = kept.objectID

        let child = view.newChildContext(name: "editor")
        let seen = try await child.perform { context in
            try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map { "\($0.title):\($0.pages)" }
        }
        #expect(seen == ["Kept:11", "Draft:30"])
        let draftInChild = try await child.perform { context in try context.existingObject(with: draftID).title }
        #expect(draftInChild == "Draft")   // an unsaved parent object resolves in its child: IDs are permanent

        try await child.perform { context in
            try context.existingObject(with: keptID).title = "Kept, edited in child"
            context.insert(Book(isbn: "4", title: "Born in child"))
            try context.save()
        }
        #expect(kept.title == "Kept, edited in child")          // now an unsaved change of the parent
        #expect(kept.pages == 11)
        #expect(view.hasChanges)
        #expect(try view.fetch(FetchRequest<Book>()).count == 3)
        let onDisk = try await container.newBackgroundContext().perform { try $0.count(for: FetchRequest<Book>()) }
        #expect(onDisk == 2)                                     // nothing reached the store yet
        try view.save()
        let afterParentSave = try await container.newBackgroundContext().perform { context in
            try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title)
        }
        #expect(afterParentSave == ["Kept, edited in child", "Draft", "Born in child"])
    }

    @Test("Discarding a child cancels its edits")
    func scratchpad() async throws {
        let container = try StoreKind.inMemory.makeContainer()
        let view = container.viewContext
        let book = Book(isbn: "1", title: "Original")
        view.insert(book)
        try view.save()
        let id = book.objectID
        do {
            let child = view.newChildContext()
            try await child.perform { context in try context.existingObject(with: id).title = "Abandoned" }
        }
        #expect(book.title == "Original")
        #expect(!view.hasChanges)
    }

    @Test("The three-level stack: writer → main → worker, saved recursively to disk", arguments: StoreKind.allCases)
    func threeLevels(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let writer = container.newBackgroundContext(name: "writer")
        let main = writer.newMainActorChildContext()
        let worker = main.newChildContext(name: "worker")
        #expect(main.hasParentContext)

        let id = try await worker.perform { context in
            let book = Book(isbn: "1", title: "From the worker")
            context.insert(book)
            try context.saveRecursively()
            return book.objectID
        }
        #expect(try main.existingObject(with: id).title == "From the worker")
        #expect(!main.hasChanges)
        #expect(await writer.perform { !$0.hasChanges })
        let stored = try await container.newBackgroundContext().perform { try $0.existingObject(with: id).title }
        #expect(stored == "From the worker")

        // Main edits, then pushes to disk in one call: main → writer → store.
        try main.existingObject(with: id).pages = 5
        try main.saveRecursively()
        let pages = try await container.newBackgroundContext().perform { try $0.existingObject(with: id).pages }
        #expect(pages == 5)
    }

    @Test("A child of the view context works with performAndWait from the main actor: fetch, fault, save into the parent", arguments: StoreKind.allCases)
    func childOfViewContextWaitedForOnMainActor(kind: StoreKind) async throws {
        try await CorrectUse.childOfViewContext(kind)
    }

    @Test("writer → main → worker works from the main actor with performAndWait and await perform", arguments: StoreKind.allCases)
    func threeLevelsWaitedForOnMainActor(kind: StoreKind) async throws {
        try await CorrectUse.writerMainWorkerStack(kind)
    }

    @Test("A background parent can wait synchronously for its idle child, whose hops borrow the parent", arguments: StoreKind.allCases)
    func backgroundParentWaitsForIdleChild(kind: StoreKind) async throws {
        try await CorrectUse.childOfBackgroundContext(kind)
    }

    @Test("The README's nested stack runs")
    func readmeNestedStack() async throws {
        let container = try StoreKind.inMemory.makeContainer()
        // BEGIN README NESTED STACK
        let writer = container.newBackgroundContext(name: "writer")   // saves to the store
        let main = writer.newMainActorChildContext()                  // @MainActor; saves into the writer
        let worker = main.newChildContext(name: "worker")            // saves into main
        try await worker.perform { context in
            context.insert(Book(isbn: "1", title: "Nested"))
            try context.saveRecursively()                             // worker → main → writer → disk
        }
        // END README NESTED STACK
        #expect(try await container.performBackgroundTask { try $0.count(for: FetchRequest<Book>()) } == 1)
    }

    @Test("A child's changes to an object its parent deleted fail cleanly")
    func deletedInParent() async throws {
        let container = try StoreKind.inMemory.makeContainer()
        let view = container.viewContext
        let book = Book(isbn: "1", title: "Contested")
        view.insert(book)
        try view.save()
        let id = book.objectID
        let child = view.newChildContext()
        try await child.perform { context in
            context.retainsRegisteredObjects = true
            try context.existingObject(with: id).title = "Child's edit"
        }
        view.delete(book)
        let error = try await child.perform { context in
            try #require(throws: LoomError.self) { try context.save() }
        }
        #expect(error.code == .objectNotFound)
        #expect(await child.perform { $0.hasChanges })   // the child keeps its changes
    }
}
