import Foundation
import Loom
import Testing

/// Store-level behaviour that must be the same on every store.
@MainActor
@Suite("Store conformance", .timeLimit(.minutes(5)))
struct StoreConformanceTests {
    @Test("Inserted objects are saved and fetched back", arguments: StoreKind.allCases)
    func insertSaveFetch(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Threads", pages: 320)
        context.insert(book)
        #expect(book.isInserted)
        #expect(context.hasChanges)
        try context.save()
        #expect(!context.hasChanges)
        #expect(!book.isInserted)

        let other = container.newBackgroundContext()
        let titles = try other.performAndWait { context in
            try context.fetch(FetchRequest<Book>()).map { "\($0.title):\($0.pages)" }
        }
        #expect(titles == ["Threads:320"])
    }

    @Test("IDs are permanent from insert and survive save", arguments: StoreKind.allCases)
    func permanentIDs(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(context: context)
        book.isbn = "1"; book.title = "A"
        let before = book.objectID
        try context.save()
        #expect(book.objectID == before)
        let second = Book(context: context)
        #expect(second.objectID != before)
        #expect(second.objectID.primaryKey > 0)
    }

    @Test("Defaults come from initial values; optionals start nil", arguments: StoreKind.allCases)
    func defaults(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let book = Book(context: container.viewContext)
        #expect(book.pages == 0)
        #expect(book.genre == .fiction)
        #expect(book.rating == nil)
        #expect(Book.entity.attribute(named: "scratch") == nil)
    }

    @Test("Predicates, sorting, limit and offset", arguments: StoreKind.allCases)
    func queries(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        for (i, title) in ["Alpha", "beta", "Gamma", "delta", "Épsilon"].enumerated() {
            let book = Book(isbn: "\(i)", title: title, pages: (i + 1) * 100)
            book.rating = i.isMultiple(of: 2) ? Double(i) : nil
            book.genre = i < 2 ? .science : .history
            context.insert(book)
        }
        try context.save()

        func titles(_ request: FetchRequest<Book>) throws -> [String] {
            try context.fetch(request).map(\.title)
        }
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.pages > 250 }, sortBy: [SortDescriptor(\.pages)])) == ["Gamma", "delta", "Épsilon"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.pages >= 200 && $0.pages <= 300 }, sortBy: [SortDescriptor(\.title)])) == ["Gamma", "beta"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.pages < 200 || $0.pages == 500 }, sortBy: [SortDescriptor(\.pages, order: .reverse)])) == ["Épsilon", "Alpha"])
        #expect(try titles(FetchRequest(predicate: #Predicate { !($0.pages > 100) })) == ["Alpha"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.rating == nil }, sortBy: [SortDescriptor(\.title)])) == ["beta", "delta"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.rating != nil }, sortBy: [SortDescriptor(\.pages)])) == ["Alpha", "Gamma", "Épsilon"])
        #expect(try titles(FetchRequest(predicate: #Predicate { ($0.rating ?? -1) > 1 }, sortBy: [SortDescriptor(\.pages)])) == ["Gamma", "Épsilon"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.rating.flatMap { $0 >= 2 } == true }, sortBy: [SortDescriptor(\.pages)])) == ["Gamma", "Épsilon"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.title.contains("ta") }, sortBy: [SortDescriptor(\.pages)])) == ["beta", "delta"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.title.starts(with: "G") })) == ["Gamma"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.title.localizedStandardContains("EPS") })) == ["Épsilon"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.title.localizedStandardContains("alp") })) == ["Alpha"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.title.localizedLowercase == "gamma" })) == ["Gamma"])
        let wanted = [100, 300]
        #expect(try titles(FetchRequest(predicate: #Predicate { wanted.contains($0.pages) }, sortBy: [SortDescriptor(\.pages)])) == ["Alpha", "Gamma"])
        let science = Genre.science
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.genre == science }, sortBy: [SortDescriptor(\.pages)])) == ["Alpha", "beta"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.pages % 200 == 0 }, sortBy: [SortDescriptor(\.pages)])) == ["beta", "delta"])
        #expect(try titles(FetchRequest(predicate: #Predicate { $0.title.count == 5 }, sortBy: [SortDescriptor(\.pages)])) == ["Alpha", "Gamma", "delta"])
        // Sort by binary (code point) order: upper case before lower case.
        #expect(try titles(FetchRequest(sortBy: [SortDescriptor(\.title)])) == ["Alpha", "Gamma", "beta", "delta", "Épsilon"])
        #expect(try titles(FetchRequest(sortBy: [SortDescriptor(\.pages)], fetchLimit: 2, fetchOffset: 1)) == ["beta", "Gamma"])
        #expect(try context.count(for: FetchRequest<Book>(predicate: #Predicate { $0.pages > 150 })) == 4)
        #expect(try context.count(for: FetchRequest<Book>(fetchLimit: 2, fetchOffset: 4)) == 1)
        #expect(try context.fetchIDs(FetchRequest<Book>(sortBy: [SortDescriptor(\.pages)], fetchLimit: 1)).first?.primaryKey != nil)
        // Optional sort: nil first ascending, as SQLite orders NULLs.
        #expect(try titles(FetchRequest(sortBy: [SortDescriptor(\.rating), SortDescriptor(\.title)])) == ["beta", "delta", "Alpha", "Gamma", "Épsilon"])
    }

    @Test("Fetches reflect unsaved inserts, edits and deletes", arguments: StoreKind.allCases)
    func pendingChanges(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let a = Book(isbn: "a", title: "A", pages: 100)
        let b = Book(isbn: "b", title: "B", pages: 200)
        let c = Book(isbn: "c", title: "C", pages: 300)
        [a, b, c].forEach(context.insert)
        try context.save()

        let d = Book(isbn: "d", title: "D", pages: 400)   // unsaved insert
        context.insert(d)
        a.pages = 1000                                     // unsaved edit: now matches
        c.pages = 10                                       // unsaved edit: no longer matches
        context.delete(b)                                  // unsaved delete
        let request = FetchRequest<Book>(predicate: #Predicate { $0.pages > 150 }, sortBy: [SortDescriptor(\.pages)])
        #expect(try context.fetch(request).map(\.title) == ["D", "A"])
        #expect(try context.count(for: request) == 2)
        #expect(try context.fetchIDs(request) == [d.objectID, a.objectID])
        var limited = request
        limited.fetchLimit = 1
        #expect(try context.fetch(limited).map(\.title) == ["D"])

        var storeOnly = request
        storeOnly.includesPendingChanges = false
        #expect(try context.fetch(storeOnly).map(\.title) == ["B", "C"])
    }

    @Test("Uniqueness is checked among pending inserts before any write", arguments: StoreKind.allCases)
    func uniquenessAmongPending(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        context.insert(Book(isbn: "dup-978", title: "One"))
        let second = Book(isbn: "dup-978", title: "Two")
        context.insert(second)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .uniquenessViolation)
        #expect(error.entityName == "Book")
        #expect(error.attributeNames == ["isbn"])
        #expect(!error.message.contains("dup-978"), "values must not leak into messages")
        // Nothing was written, the context is unchanged and usable.
        #expect(context.hasChanges)
        #expect(try context.count(for: FetchRequest<Book>(fetchLimit: nil)) == 2)
        let fresh = container.newBackgroundContext()
        #expect(try fresh.performAndWait { try $0.count(for: FetchRequest<Book>()) } == 0)
        second.isbn = "different"
        try context.save()
        #expect(try fresh.performAndWait { try $0.count(for: FetchRequest<Book>()) } == 2)
    }

    @Test("Uniqueness against saved rows, single and compound", arguments: StoreKind.allCases)
    func uniquenessAgainstStore(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        context.insert(Book(isbn: "x", title: "One"))
        context.insert(Shelf(room: "hall", position: 1))
        context.insert(Shelf(room: "hall", position: 2))
        try context.save()

        let background = container.newBackgroundContext()
        let error = try background.performAndWait { context in
            context.insert(Book(isbn: "x", title: "Two"))
            return try #require(throws: LoomError.self) { try context.save() }
        }
        #expect(error.code == .uniquenessViolation)
        #expect(error.attributeNames == ["isbn"])

        context.insert(Shelf(room: "hall", position: 2))
        let compound = try #require(throws: LoomError.self) { try context.save() }
        #expect(compound.code == .uniquenessViolation)
        #expect(compound.entityName == "Shelf")
        #expect(Set(compound.attributeNames) == ["room", "position"])
        // Same room, other position: fine once the duplicate is fixed.
        context.rollback()
        context.insert(Shelf(room: "hall", position: 3))
        try context.save()
        #expect(try context.count(for: FetchRequest<Shelf>()) == 3)
    }

    @Test("A missing required value fails the save and changes nothing", arguments: StoreKind.allCases)
    func missingRequired(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(context: context)
        book.isbn = "1"
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .missingRequiredValue)
        #expect(error.attributeNames == ["title"])
        #expect(error.objectID == book.anyObjectID)
        #expect(book.isInserted)
        book.title = "Now set"
        try context.save()
        #expect(!book.isInserted)
    }

    @Test("A save that conflicts in the store leaves the context exactly as it was", arguments: StoreKind.allCases)
    func failedSaveLeavesContextIntact(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let kept = Book(isbn: "k", title: "Kept", pages: 1)
        context.insert(kept)
        context.insert(Book(isbn: "dup", title: "Saved"))
        try context.save()

        kept.pages = 2
        let newBook = Book(isbn: "dup", title: "Clash")
        context.insert(newBook)
        #expect(throws: LoomError.self) { try context.save() }
        #expect(kept.pages == 2)
        #expect(kept.isUpdated)
        #expect(newBook.isInserted)
        #expect(context.hasChanges)
        // The store still has the old value.
        let stored = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "k" })).first?.pages
        }
        #expect(stored == 1)
        newBook.isbn = "unique"
        try context.save()
    }

    @Test("Rollback restores saved values and forgets inserts", arguments: StoreKind.allCases)
    func rollback(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Original")
        context.insert(book)
        try context.save()
        book.title = "Changed"
        let inserted = Book(isbn: "2", title: "New")
        context.insert(inserted)
        let insertedID = inserted.objectID
        context.delete(book)
        context.rollback()
        #expect(book.title == "Original")
        #expect(!book.isDeleted)
        #expect(!context.hasChanges)
        #expect(context.registeredObject(for: insertedID) == nil)
        #expect(try context.fetch(FetchRequest<Book>()).count == 1)
    }

    @Test("Deleting saves; an object inserted then deleted leaves no trace", arguments: StoreKind.allCases)
    func delete(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Doomed")
        context.insert(book)
        try context.save()
        let id = book.objectID
        context.delete(book)
        #expect(book.isDeleted)
        #expect(try context.fetch(FetchRequest<Book>()).isEmpty)
        try context.save()
        #expect(try context.count(for: FetchRequest<Book>(predicate: nil)) == 0)
        let error = try #require(throws: LoomError.self) { try context.existingObject(with: id) }
        #expect(error.code == .objectNotFound)

        let ghost = Book(isbn: "2", title: "Ghost")
        context.insert(ghost)
        context.delete(ghost)
        #expect(!context.hasChanges)
        try context.save()
        #expect(try context.count(for: FetchRequest<Book>()) == 0)
    }

    @Test("registeredObject, object(with:) and existingObject(with:) differ as in Core Data", arguments: StoreKind.allCases)
    func resolvingIDs(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let saved = try container.newBackgroundContext().performAndWait { context in
            let book = Book(isbn: "1", title: "Saved")
            context.insert(book)
            try context.save()
            return book.objectID
        }
        let context = container.viewContext
        #expect(context.registeredObject(for: saved) == nil)          // never I/O, not registered
        let fault = try context.object(with: saved)
        #expect(fault.isFault)                                         // a fault, no I/O yet
        #expect(context.registeredObject(for: saved) === fault)        // now registered
        #expect(fault.title == "Saved")                                // fires the fault
        #expect(!fault.isFault)
        #expect(try context.existingObject(with: saved) === fault)      // uniquing: one instance per ID

        let fresh = container.newBackgroundContext()
        let loaded = try fresh.performAndWait { context in
            let book = try context.existingObject(with: saved)
            return (book.isFault, book.title)
        }
        #expect(loaded == (false, "Saved"))
    }

    @Test("An unsaved object's ID resolves only in its own context", arguments: StoreKind.allCases)
    func unsavedIDs(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Draft")
        context.insert(book)
        let id = book.objectID
        #expect(try context.existingObject(with: id) === book)
        let error = try container.newBackgroundContext().performAndWait { other in
            try #require(throws: LoomError.self) { try other.existingObject(with: id) }
        }
        #expect(error.code == .objectNotSavedYet)
        try context.save()
        let title = try container.newBackgroundContext().performAndWait { try $0.existingObject(with: id).title }
        #expect(title == "Draft")
    }

    @Test("Object URIs round-trip through the coordinator; bad ones are clear errors", arguments: StoreKind.allCases)
    func uris(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "URI")
        context.insert(book)
        try context.save()
        let uri = book.objectID.uriRepresentation
        #expect(uri.absoluteString == "loom://\(container.coordinator.storeIdentifier.uuidString)/Book/\(book.objectID.primaryKey)")
        let back = try container.coordinator.objectID(forURIRepresentation: uri)
        #expect(back == book.objectID.erased)
        #expect(ObjectID<Book>(back) == book.objectID)
        #expect(ObjectID<Shelf>(back) == nil)

        func code(_ text: String) -> LoomError.Code? {
            do { _ = try container.coordinator.objectID(forURIRepresentation: URL(string: text)!); return nil }
            catch { return error.code }
        }
        #expect(code("https://example.com/Book/1") == .malformedURI)
        #expect(code("loom://not-a-uuid/Book/1") == .malformedURI)
        #expect(code("loom://\(container.coordinator.storeIdentifier.uuidString)/Book/abc") == .malformedURI)
        #expect(code("loom://\(container.coordinator.storeIdentifier.uuidString)/Book") == .malformedURI)
        #expect(code("loom://\(container.coordinator.storeIdentifier.uuidString)/Nope/1") == .unknownEntity)
        #expect(code("loom://\(UUID().uuidString)/Book/1") == .foreignObjectID)
    }

    @Test("A context resolving IDs one after another still refuses another store's and an unknown entity's", arguments: StoreKind.allCases)
    @MainActor
    func idsResolvedInARow(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "First")
        let shelf = Shelf(room: "Hall", position: 1)
        context.insert(book)
        context.insert(shelf)
        try context.save()
        let id = book.objectID.erased
        let store = container.coordinator.storeIdentifier
        func code(_ id: AnyObjectID) -> LoomError.Code? {
            do { _ = try context.existingObject(with: id); return nil } catch { return error.code }
        }
        // The same entity twice, then an ID naming it in another store, then one the model lacks,
        // then another entity: each is answered as if it came first.
        #expect(code(id) == nil)
        #expect(code(id) == nil)
        #expect(code(AnyObjectID(storeIdentifier: UUID(), entityName: "Book", primaryKey: id.primaryKey)) == .foreignObjectID)
        #expect(code(AnyObjectID(storeIdentifier: store, entityName: "Nope", primaryKey: 1)) == .unknownEntity)
        #expect(code(AnyObjectID(storeIdentifier: store, entityName: "Book", primaryKey: 999_999)) == .objectNotFound)
        #expect(code(shelf.objectID.erased) == nil)
        #expect(try context.existingObject(with: id) === book)
        #expect(try context.object(with: AnyObjectID(storeIdentifier: store, entityName: "Shelf", primaryKey: shelf.objectID.primaryKey)) === shelf)
        #expect(throws: LoomError.self) { try context.object(with: AnyObjectID(storeIdentifier: UUID(), entityName: "Shelf", primaryKey: 1)) }
    }

    @Test("IDs are Codable and Hashable", arguments: StoreKind.allCases)
    func idCoding(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let book = Book(context: container.viewContext)
        let data = try JSONEncoder().encode(book.objectID)
        let decoded = try JSONDecoder().decode(ObjectID<Book>.self, from: data)
        #expect(decoded == book.objectID)
        #expect(Set([decoded, book.objectID]).count == 1)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ObjectID<Shelf>.self, from: data) }
    }

    @Test("Changed values and committed values", arguments: StoreKind.allCases)
    func changedValues(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Before", pages: 10)
        context.insert(book)
        try context.save()
        #expect(book.changedValues().isEmpty)
        book.title = "After"
        #expect(book.changedValues() == ["title": .text("After")])
        #expect(book.committedValues(forKeys: ["title"]) == ["title": .text("Before")])
        #expect(book.isUpdated)
        #expect(context.updated.count == 1)
    }

    /// A fetched object's values are its committed values until it changes (held once): every
    /// change, rollback, save and refresh must still tell the two apart.
    @Test("Fetched objects keep their committed values through changes, rollbacks and saves", arguments: StoreKind.allCases, [true, false])
    func committedValuesOfFetchedObjects(kind: StoreKind, asFaults: Bool) throws {
        let container = try kind.makeContainer()
        try container.newBackgroundContext().performAndWait { context in
            for index in 0..<3 { context.insert(Book(isbn: "\(index)", title: "T\(index)", pages: index)) }
            try context.save()
        }
        var request = FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])
        request.returnsObjectsAsFaults = asFaults
        try container.newBackgroundContext().performAndWait { context in
            let books = try context.fetch(request)
            #expect(books.map(\.isFault) == [asFaults, asFaults, asFaults])
            #expect(books.map(\.title) == ["T0", "T1", "T2"])
            #expect(books.allSatisfy { $0.changedValues().isEmpty })

            books[1].title = "Changed"
            books[1].pages = 7
            #expect(books[1].changedValues() == ["title": .text("Changed"), "pages": .integer(7)])
            #expect(books[1].committedValues(forKeys: ["title", "pages"]) == ["title": .text("T1"), "pages": .integer(1)])
            // Its neighbours, fetched with it, are untouched.
            #expect(books[0].committedValues(forKeys: ["title"]) == ["title": .text("T0")])
            #expect(books[2].changedValues().isEmpty)

            context.rollback()
            #expect(books[1].title == "T1")
            #expect(books[1].pages == 1)
            #expect(books[1].changedValues().isEmpty)
            #expect(!context.hasChanges)

            books[1].title = "Saved"
            try context.save()
            #expect(books[1].changedValues().isEmpty)
            #expect(books[1].committedValues(forKeys: ["title"]) == ["title": .text("Saved")])

            // The saved values are the committed ones now; a change after the save parts them again.
            books[1].title = "After save"
            #expect(books[1].changedValues() == ["title": .text("After save")])
            #expect(books[1].committedValues(forKeys: ["title"]) == ["title": .text("Saved")])
            try context.refresh(books[1], mergeChanges: false)
            #expect(books[1].title == "Saved")
            #expect(!context.hasChanges)
        }
        try container.newBackgroundContext().performAndWait { context in
            let titles = try context.fetch(request).map(\.title)
            #expect(titles == ["T0", "Saved", "T2"])
        }
    }

    @Test("refresh(mergeChanges:) discards or keeps unsaved edits", arguments: StoreKind.allCases)
    func refresh(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Mine", pages: 1)
        context.insert(book)
        try context.save()
        let id = book.objectID
        try container.newBackgroundContext().performAndWait { other in
            let theirs = try other.existingObject(with: id)
            theirs.pages = 99
            try other.save()
        }
        book.title = "Edited"
        try context.refresh(book, mergeChanges: true)
        #expect(book.pages == 99)
        #expect(book.title == "Edited")
        try context.refresh(book, mergeChanges: false)
        #expect(book.isFault)
        #expect(book.title == "Mine")
        #expect(!context.hasChanges)
    }

    /// A container, and a context that merges nothing by itself and keeps its objects, holding
    /// `count` saved books B0, B1… (pages 0, 1…) in key order: the one at `fault` is a fault,
    /// the one at `changed` has the unsaved title "Mine", the others are loaded.
    func readerWithBooks(_ kind: StoreKind, count: Int, fault: Int, changed: Int) throws -> (PersistentContainer, BackgroundContext, [ObjectID<Book>]) {
        let container = try kind.makeContainer()
        let reader = container.newBackgroundContext(name: "reader")
        let ids = try reader.performAndWait { context in
            context.automaticallyMergesChanges = false
            context.retainsRegisteredObjects = true
            let books = (0..<count).map { Book(isbn: "\($0)", title: "B\($0)", pages: $0) }
            for book in books { context.insert(book) }
            try context.save()
            try context.refresh(books[fault], mergeChanges: false)
            books[changed].title = "Mine"
            return books.map(\.objectID)
        }
        return (container, reader, ids)
    }

    /// Which of six saved books another context deletes: by the lowest and the highest key
    /// (refreshing meets them in no set order), the one left a fault and the one with unsaved
    /// changes, or all of them.
    enum DeletedElsewhere: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case lowestKey, highestKey, lowestAndHighestKeys, faultAndChanged, every
        var indexes: Set<Int> {
            switch self {
            case .lowestKey: [0]
            case .highestKey: [5]
            case .lowestAndHighestKeys: [0, 5]
            case .faultAndChanged: [3, 4]
            case .every: Set(0..<6)
            }
        }
        var testDescription: String { rawValue }
    }

    @Test("refreshAllObjects() refreshes every object when others were deleted elsewhere: those become faults that read as deleted, unsaved changes stay",
          arguments: StoreKind.allCases, DeletedElsewhere.allCases)
    func refreshAllAfterDeletionsElsewhere(kind: StoreKind, deleted: DeletedElsewhere) throws {
        let (container, reader, ids) = try readerWithBooks(kind, count: 6, fault: 3, changed: 4)
        try container.newBackgroundContext(name: "writer").performAndWait { context in
            for (i, id) in ids.enumerated() {
                let book = try context.existingObject(with: id)
                if deleted.indexes.contains(i) { context.delete(book) } else { book.pages += 100 }
            }
            try context.save()
        }
        try reader.performAndWait { context in
            let books = try ids.map { try #require(context.registeredObject(for: $0.erased) as? Book) }
            var refreshed: Set<AnyObjectID> = []
            let token = context.addObserver(for: .objectsDidChange) { event in
                if case .objectsDidChange(let changes) = event { refreshed.formUnion(changes.refreshed) }
            }
            defer { context.removeObserver(token) }
            try context.refreshAllObjects()
            #expect(refreshed == Set(ids.map(\.erased)))
            for (i, book) in books.enumerated() where !deleted.indexes.contains(i) {
                #expect(book.pages == i + 100, "book \(i)")
                #expect(!book.isDeleted)
                #expect(book.title == (i == 4 ? "Mine" : "B\(i)"))
            }
            for (i, book) in books.enumerated() where deleted.indexes.contains(i) && i != 4 {
                #expect(book.isFault, "book \(i)")
                if i.isMultiple(of: 2) {
                    // Used, the fault finds its row gone and reads as deleted.
                    #expect(book.title == "")
                } else {
                    let error = try #require(throws: LoomError.self) { try context.fulfillFault(of: book) }
                    #expect(error.code == .objectNotFound)
                    #expect(error.objectID == ids[i].erased)
                }
                #expect(book.isDeleted)
                #expect(context.registeredObject(for: ids[i].erased) == nil)
            }
            // Unsaved changes to an object deleted elsewhere are kept; saving them is a conflict.
            #expect(books[4].title == "Mine")
            #expect(books[4].isUpdated)
            if deleted.indexes.contains(4) {
                let error = try #require(throws: LoomError.self) { try context.save() }
                #expect(error.code == .versionConflict)
                #expect(error.objectID == ids[4].erased)
                #expect(books[4].title == "Mine")
            } else {
                try context.save()
            }
        }
    }

    @Test("refresh(_:mergeChanges:) of an object deleted elsewhere makes a fault that reads as deleted; merging keeps unsaved changes",
          arguments: StoreKind.allCases, [true, false])
    func refreshObjectDeletedElsewhere(kind: StoreKind, mergeChanges: Bool) throws {
        let (container, reader, ids) = try readerWithBooks(kind, count: 3, fault: 2, changed: 1)
        try container.newBackgroundContext(name: "writer").performAndWait { context in
            for id in ids { context.delete(try context.existingObject(with: id)) }
            try context.save()
        }
        try reader.performAndWait { context in
            let books = try ids.map { try #require(context.registeredObject(for: $0.erased) as? Book) }
            for book in books { try context.refresh(book, mergeChanges: mergeChanges) }
            #expect(books[0].isFault)
            #expect(books[0].pages == 0 && books[0].title == "")
            #expect(books[0].isDeleted)
            #expect(books[2].isFault)
            #expect(throws: LoomError.self) { try context.fulfillFault(of: books[2]) }
            #expect(books[2].isDeleted)
            if mergeChanges {
                #expect(!books[1].isFault)
                #expect(books[1].title == "Mine" && books[1].isUpdated)
                #expect(context.hasChanges)
            } else {
                #expect(books[1].isFault)
                #expect(!context.hasChanges)
                let error = try #require(throws: LoomError.self) { try context.fulfillFault(of: books[1]) }
                #expect(error.code == .objectNotFound)
                #expect(books[1].isDeleted)
            }
        }
    }

    @Test("Saving an update bumps the version; a stale update is a conflict", arguments: StoreKind.allCases)
    func optimisticLocking(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "V1")
        context.insert(book)
        try context.save()
        let id = book.objectID
        _ = book.title   // loaded at version 1
        try container.newBackgroundContext().performAndWait { other in
            try other.existingObject(with: id).title = "Theirs"
            try other.save()
        }
        book.title = "Mine"
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .versionConflict)
        #expect(error.objectID == id.erased)
        #expect(book.title == "Mine")
        try context.refresh(book, mergeChanges: true)
        try context.save()
        let title = try container.newBackgroundContext().performAndWait { try $0.existingObject(with: id).title }
        #expect(title == "Mine")
    }

    @Test("A predicate Loom cannot translate is an error naming the construct", arguments: StoreKind.allCases)
    func unsupportedPredicate(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        context.insert(Book(isbn: "1", title: "x"))
        let request = FetchRequest<Book>(predicate: #Predicate { $0.pages > ([1, 2].max() ?? 0) })
        let error = try #require(throws: LoomError.self) { try context.fetch(request) }
        #expect(error.code == .unsupportedPredicate)
        #expect(error.message.contains("SequenceMaximum"))
        let decimal = FetchRequest<Sample>(predicate: #Predicate { $0.decimal > 3 })
        let ordering = try #require(throws: LoomError.self) { try context.fetch(decimal) }
        #expect(ordering.message.contains("decimal"))
    }

    @Test("Reset forgets registered objects and unsaved changes", arguments: StoreKind.allCases)
    func reset(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let saved = Book(isbn: "1", title: "Saved")
        context.insert(saved)
        try context.save()
        let id = saved.objectID
        context.insert(Book(isbn: "2", title: "Unsaved"))
        context.reset()
        #expect(!context.hasChanges)
        #expect(context.registeredObject(for: id) == nil)
        #expect(try context.fetch(FetchRequest<Book>()).map(\.title) == ["Saved"])
    }
}
