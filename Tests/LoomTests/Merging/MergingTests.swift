import Foundation
import Loom
import Testing

/// Change events, merging between contexts, merge policies and the container's save helpers.
@MainActor
@Suite("Merging and events", .timeLimit(.minutes(5)))
struct MergingTests {
    @Test("objectsDidChange, willSave and didSave carry IDs and changed property names", arguments: StoreKind.allCases)
    func events(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let background = container.newBackgroundContext()
        let log = try await background.perform { context in
            var log: [String] = []
            context.addObserver(for: .objectsDidChange) { event in
                guard case .objectsDidChange(let c) = event else { return }
                log.append("change i\(c.inserted.count) u\(c.updated.count) d\(c.deleted.count) \(c.changedProperties.values.flatMap { $0 }.sorted())")
            }
            context.addObserver(for: .willSave) { _ in log.append("willSave") }
            context.addObserver(for: .didSave) { event in
                guard case .didSave(let c) = event else { return }
                log.append("didSave i\(c.inserted.count) u\(c.updated.count) d\(c.deleted.count)")
            }
            let a = Book(isbn: "a", title: "A"), b = Book(isbn: "b", title: "B")
            context.insert(a); context.insert(b)
            context.processPendingChanges()
            try context.save()
            a.title = "A2"
            a.pages = 7
            context.delete(b)
            try context.save()
            // Changed in the event that inserted it, an object is reported inserted only; changed
            // in a later event, updated, with every property (it has no saved values to compare).
            let c = Book(isbn: "c", title: "C")
            context.insert(c)
            c.pages = 1
            context.processPendingChanges()
            c.pages = 2
            context.processPendingChanges()
            return log
        }
        #expect(log == [
            "change i2 u0 d0 []", "willSave", "didSave i2 u0 d0",
            "change i0 u1 d1 [\"pages\", \"title\"]", "willSave", "didSave i0 u1 d1",
            "change i1 u0 d0 []",
            "change i0 u1 d0 [\"genre\", \"isbn\", \"pages\", \"published\", \"rating\", \"title\"]",
        ])
    }

    @Test("Events arrive as an AsyncSequence too")
    func eventStream() async throws {
        let container = try StoreKind.inMemory.makeContainer()
        let view = container.viewContext
        let stream = view.events()
        view.insert(Book(isbn: "1", title: "Streamed"))
        try view.save()
        var kinds: [ContextEvent.Kind] = []
        for await event in stream {
            kinds.append(event.kind)
            if event.kind == .didSave { break }
        }
        #expect(kinds == [.objectsDidChange, .willSave, .didSave])
    }

    @Test("A background save is merged into the view context asynchronously, faults included", arguments: StoreKind.allCases)
    func automaticMerge(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        let loaded = Book(isbn: "1", title: "Loaded"), faulted = Book(isbn: "2", title: "Fault"), doomed = Book(isbn: "3", title: "Doomed")
        [loaded, faulted, doomed].forEach(view.insert)
        try view.save()
        let ids = (loaded.objectID, faulted.objectID, doomed.objectID)
        try view.refresh(faulted, mergeChanges: false)
        #expect(faulted.isFault)
        loaded.pages = 42   // an unsaved edit here, on another attribute

        var merged: ObjectChanges?
        view.addObserver(for: .objectsDidChange) { event in
            if case .objectsDidChange(let c) = event, !c.refreshed.isEmpty { merged = c }
        }
        try await container.performBackgroundTask { context in
            try context.existingObject(with: ids.0).title = "Loaded, changed elsewhere"
            try context.existingObject(with: ids.1).title = "Fault, changed elsewhere"
            context.delete(try context.existingObject(with: ids.2))
            context.insert(Book(isbn: "4", title: "New"))
            try context.save()
        }
        try await settle { merged != nil }
        let changes = try #require(merged)
        #expect(changes.refreshed == [ids.0.erased, ids.1.erased])          // the fault is reported too
        #expect(changes.deleted == [ids.2.erased])
        #expect(changes.inserted.count == 1)
        #expect(changes.changedProperties[ids.1.erased] == ["title"])
        #expect(loaded.title == "Loaded, changed elsewhere")
        #expect(loaded.pages == 42)                                          // the local edit stays on top
        #expect(loaded.isUpdated)
        #expect(faulted.isFault)
        #expect(faulted.title == "Fault, changed elsewhere")
        #expect(doomed.isDeleted)
        #expect(view.registeredObject(for: ids.2) == nil)
        #expect(try view.fetch(FetchRequest<Book>()).count == 3)
        #expect(view.lastMergedSaveNumber > 0)
    }

    @Test("An attribute changed on both sides: the merge keeps the local edit whatever the merge policy, and the next save writes it", arguments: StoreKind.allCases)
    func mergeIsPropertyWiseObjectTrump(kind: StoreKind) async throws {
        for policy in [MergePolicy.error, .mergeByPropertyStoreTrump, .rollback] {
            let container = try kind.makeContainer()
            let view = container.viewContext
            view.mergePolicy = policy
            let book = Book(isbn: "1", title: "Original", pages: 1)
            view.insert(book)
            try view.save()
            let id = book.objectID
            book.title = "Mine"                        // changed here…
            try await container.performBackgroundTask { context in
                let theirs = try context.existingObject(with: id)
                theirs.title = "Theirs"                // …and there
                theirs.pages = 2                       // only there
                try context.save()
            }
            try await settle { book.pages == 2 }
            #expect(book.title == "Mine", "policy \(policy)")
            #expect(book.changedValues().keys.sorted() == ["title"])
            try view.save()                            // no conflict: the merge took the new version
            let stored = try await container.performBackgroundTask { context in
                let b = try context.existingObject(with: id)
                return "\(b.title) \(b.pages)"
            }
            #expect(stored == "Mine 2", "policy \(policy)")
        }
    }

    @Test("Background contexts merge only when asked, or explicitly", arguments: StoreKind.allCases)
    func manualMerge(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let saver = container.newBackgroundContext(name: "saver")
        let reader = container.newBackgroundContext(name: "reader")
        let id = try await saver.perform { context in
            let book = Book(isbn: "1", title: "V1")
            context.insert(book)
            try context.save()
            return book.objectID
        }
        try await reader.perform { context in
            context.retainsRegisteredObjects = true
            _ = try context.existingObject(with: id).title
        }
        let payload = try await saver.perform { context -> ObjectChanges in
            var saved = ObjectChanges()
            context.addObserver(for: .didSave) { if case .didSave(let c) = $0 { saved = c } }
            try context.existingObject(with: id).title = "V2"
            try context.save()
            return saved
        }
        #expect(await reader.perform { ($0.registeredObject(for: id))?.title } == "V1")   // not merged: still its own snapshot
        await reader.perform { context in context.mergeChanges(fromContextDidSave: payload) }
        #expect(await reader.perform { ($0.registeredObject(for: id))?.title } == "V2")
    }

    @Test("The save helper returns after the commit and the view context's merge", arguments: StoreKind.allCases)
    func saveHelper(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        let book = Book(isbn: "1", title: "Before")
        view.insert(book)
        try view.save()
        let id = book.objectID
        let pages = try await container.save { context in
            let book = try context.existingObject(with: id)
            book.title = "After"
            book.pages = 9
            return book.pages
        }
        #expect(pages == 9)
        #expect(book.title == "After")    // merged before the helper returned: no waiting needed

        _ = try await container.save(mergingIntoViewContext: false) { context in
            try context.existingObject(with: id).title = "Unmerged"
        }
        try await Task.sleep(for: .milliseconds(20))
        #expect(book.title == "After")    // the view context was left out
        try view.refresh(book, mergeChanges: false)
        #expect(book.title == "Unmerged")

        await confirmation("completion on the main actor") { done in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                container.save({ context in try context.existingObject(with: id).pages }) { result in
                    MainActor.assertIsolated()
                    #expect((try? result.get()) == 9)
                    done()
                    continuation.resume()
                }
            }
        }

        let failure = try await #require(throws: LoomError.self) {
            try await container.save { context in
                let book = Book(context: context)   // a required title is missing
                book.isbn = "2"
            }
        }
        #expect(failure.code == .missingRequiredValue)
        #expect(try view.count(for: FetchRequest<Book>()) == 1)
    }

    @Test("An exclusive write makes read-modify-write safe without conflict handling", arguments: StoreKind.allCases)
    func exclusiveWrite(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        try await container.save { context in context.insert(Book(isbn: "counter", title: "0")) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try await container.performExclusiveWrite { context in
                        let counter = try #require(try context.fetch(FetchRequest<Book>()).first)
                        counter.pages += 1
                    }
                }
                group.addTask {
                    // Competing writers on plain background contexts, which must not break it.
                    try await container.performBackgroundTask { context in
                        context.insert(Book(isbn: UUID().uuidString, title: "noise"))
                        try context.save()
                    }
                }
            }
            try await group.waitForAll()
        }
        let counter = try container.viewContext.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "counter" })).first
        #expect(counter?.pages == 40)
    }

    @Test("close() lets saves in flight finish, then refuses new ones")
    func closeDrains() async throws {
        let url = TemporaryDirectory.make().appending(path: "close.loom")
        let container = try PersistentContainer(name: "Close", for: Book.self, location: .file(url))
        let started = DispatchSemaphore(value: 0)
        let pending = Task {
            try await container.save { context in
                started.signal()
                Thread.sleep(forTimeInterval: 0.2)   // still running when close() is called
                for i in 0..<500 { context.insert(Book(isbn: "\(i)", title: "t")) }
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { started.wait(); continuation.resume() }
        }
        try await container.close()
        // close() returned only after the save in flight committed.
        let outcome = await pending.result
        #expect(throws: Never.self) { try outcome.get() }
        let refused = try await #require(throws: LoomError.self) {
            try await container.save { context in context.insert(Book(isbn: "late", title: "t")) }
        }
        #expect(refused.code == .closed)
        let reopened = try PersistentContainer(name: "Close", for: Book.self, location: .file(url))
        #expect(try reopened.viewContext.count(for: FetchRequest<Book>()) == 500)
    }

    @Test("Without history, a second container on the same file sees the first one's saves when it reads; staleness decides what a fault reads")
    func twoContainers() async throws {
        // With history (the default) each learns of the other's saves at once (RemoteChangeTests).
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let options = SQLiteStore.Options(recordsHistory: false)
        let first = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(Book.self), options: options))
        let second = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(Book.self), options: options))
        let id = try await first.save { context in
            let book = Book(isbn: "1", title: "First")
            context.insert(book)
            return book.objectID
        }
        #expect(try second.viewContext.existingObject(with: id).title == "First")
        // A fault fired through the first coordinator puts the row in its cache (a save does
        // not: the saving context holds its new objects; nor does an ID lookup, whose object
        // is loaded at once).
        let read = try await first.newBackgroundContext().perform { context in try context.object(with: id).title }
        #expect(read == "First")
        _ = try await second.save { context in try context.existingObject(with: id).title = "Second" }

        // The first coordinator's row cache still holds "First": a fault filled from it reads
        // that by default (any age is fine), and reads the store when the cache is too old.
        let cached = try await first.newBackgroundContext().perform { context in
            try context.object(with: id).title
        }
        #expect(cached == "First")
        let fresh = try await first.newBackgroundContext().perform { context in
            context.stalenessInterval = 0
            return try context.object(with: id).title
        }
        #expect(fresh == "Second")
        #expect(try first.viewContext.existingObject(with: id).title == "Second")   // always current
    }
}

/// Conflicts at save, resolved by each merge policy.
@MainActor
@Suite("Merge policies", .timeLimit(.minutes(5)))
struct MergePolicyTests {
    /// A saved book, loaded in the view context, then changed behind its back (title and pages)
    /// by another context; the view context changes title and rating.
    func conflicted(_ kind: StoreKind) async throws -> (PersistentContainer, Book) {
        let container = try kind.makeContainer()
        let view = container.viewContext
        view.automaticallyMergesChanges = false   // merging would remove the conflict
        let book = Book(isbn: "1", title: "Original", pages: 1)
        view.insert(book)
        try view.save()
        let id = book.objectID
        try await container.newBackgroundContext().perform { context in
            let theirs = try context.existingObject(with: id)
            theirs.title = "Theirs"
            theirs.pages = 2
            try context.save()
        }
        book.title = "Mine"
        book.rating = 5
        return (container, book)
    }

    func stored(_ container: PersistentContainer, _ book: Book) async throws -> String {
        let id = book.objectID
        return try await container.newBackgroundContext().perform { context in
            let b = try context.existingObject(with: id)
            return "\(b.title) \(b.pages) \(b.rating.map { String($0) } ?? "nil")"
        }
    }

    @Test("error (the default) fails with every conflict and its snapshots, changing nothing", arguments: StoreKind.allCases)
    func errorPolicy(kind: StoreKind) async throws {
        let (container, book) = try await conflicted(kind)
        let error = try #require(throws: LoomError.self) { try container.viewContext.save() }
        #expect(error.code == .versionConflict)
        let conflict = try #require(error.conflicts.first)
        #expect(error.conflicts.count == 1)
        #expect(conflict.kind == .optimisticLocking)
        #expect(conflict.objectID == book.anyObjectID)
        #expect(conflict.originalSnapshot?["title"] == .text("Original"))
        #expect(conflict.objectSnapshot["title"] == .text("Mine"))
        #expect(conflict.persistedSnapshot?["title"] == .text("Theirs"))
        #expect(conflict.cachedSnapshot?["title"] == .text("Theirs"))
        #expect(book.title == "Mine" && book.rating == 5 && book.isUpdated)
        #expect(try await stored(container, book) == "Theirs 2 nil")
    }

    @Test("mergeByPropertyStoreTrump: the store wins where both changed", arguments: StoreKind.allCases)
    func storeTrump(kind: StoreKind) async throws {
        let (container, book) = try await conflicted(kind)
        container.viewContext.mergePolicy = .mergeByPropertyStoreTrump
        try container.viewContext.save()
        #expect(try await stored(container, book) == "Theirs 2 5.0")
        #expect(book.title == "Theirs")
    }

    @Test("mergeByPropertyObjectTrump: this context wins where both changed", arguments: StoreKind.allCases)
    func objectTrump(kind: StoreKind) async throws {
        let (container, book) = try await conflicted(kind)
        container.viewContext.mergePolicy = .mergeByPropertyObjectTrump
        try container.viewContext.save()
        #expect(try await stored(container, book) == "Mine 2 5.0")
    }

    @Test("overwrite: this context's whole object is written", arguments: StoreKind.allCases)
    func overwrite(kind: StoreKind) async throws {
        let (container, book) = try await conflicted(kind)
        container.viewContext.mergePolicy = .overwrite
        try container.viewContext.save()
        #expect(try await stored(container, book) == "Mine 1 5.0")
    }

    @Test("rollback: this context's changes to the object are dropped", arguments: StoreKind.allCases)
    func rollback(kind: StoreKind) async throws {
        let (container, book) = try await conflicted(kind)
        container.viewContext.mergePolicy = .rollback
        try container.viewContext.save()
        #expect(try await stored(container, book) == "Theirs 2 nil")
        #expect(book.title == "Theirs" && !book.isUpdated)
    }

    @Test("A custom resolver decides per conflict", arguments: StoreKind.allCases)
    func custom(kind: StoreKind) async throws {
        let (container, book) = try await conflicted(kind)
        container.viewContext.mergePolicy = .custom { conflict in
            conflict.persistedSnapshot?["pages"] == .integer(2) ? .objectTrump : .fail
        }
        try container.viewContext.save()
        #expect(try await stored(container, book) == "Mine 2 5.0")
    }

    @Test("Uniqueness conflicts: object trump keeps the saved row's ID with the new values", arguments: StoreKind.allCases)
    func uniquenessObjectTrump(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let existingID = try await container.save { context in
            let book = Book(isbn: "978", title: "Saved", pages: 1)
            context.insert(book)
            return book.objectID
        }
        let view = container.viewContext
        view.mergePolicy = .mergeByPropertyObjectTrump
        let duplicate = Book(isbn: "978", title: "Imported", pages: 300)
        view.insert(duplicate)
        try view.save()
        let books = try view.fetch(FetchRequest<Book>())
        #expect(books.count == 1)
        #expect(books.first?.objectID == existingID)
        #expect(books.first?.title == "Imported")
        #expect(books.first?.pages == 300)
        #expect(duplicate.isDeleted)
    }

    @Test("Uniqueness conflicts: store trump drops the new object, overwrite replaces the saved row", arguments: StoreKind.allCases)
    func uniquenessOtherPolicies(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        _ = try await container.save { context in context.insert(Book(isbn: "978", title: "Saved")) }
        let view = container.viewContext
        view.mergePolicy = .mergeByPropertyStoreTrump
        view.insert(Book(isbn: "978", title: "Dropped"))
        try view.save()
        #expect(try view.fetch(FetchRequest<Book>()).map(\.title) == ["Saved"])

        view.mergePolicy = .overwrite
        let replacement = Book(isbn: "978", title: "Replacement")
        view.insert(replacement)
        try view.save()
        let books = try view.fetch(FetchRequest<Book>())
        #expect(books.map(\.title) == ["Replacement"])
        #expect(books.first?.objectID == replacement.objectID)
    }
}
