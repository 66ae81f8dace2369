import Foundation
import Loom
@_spi(LoomStore) @testable import LoomCore
import Testing

/// A model conforming by hand, as `@Model` would generate it but without its `ObjectSlot`: it
/// cannot take itself out of the registry when destroyed.
final class HandWrittenNote: PersistentModel {
    var _loomBacking = ObjectBacking(entity: HandWrittenNote.entity)
    static let entity = EntityDescription(name: "HandWrittenNote", modelType: HandWrittenNote.self, attributes: [
        AttributeDescription(name: "text", valueType: String.self),
    ])
    init(backing: ObjectBacking) { _loomBacking = backing }
    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? { keyPath == \HandWrittenNote.text ? "text" : nil }
    var text: String {
        get { _loomBacking.value(at: 0, as: String.self) }
        set { _loomBacking.setValue(newValue, at: 0, of: self) }
    }
}

/// Records the order its objects are destroyed in.
@Model final class FreedInOrder {
    var n: Int
    @Transient var label = 0
    init(n: Int) {
        self.n = n
        label = n
    }
    deinit { FreedInOrder.freed.withLock { $0.append(label) } }
    static let freed = Locked<[Int]>([])
}

/// Tells whether a context and an object's backing are gone, from outside the context's queue.
/// `@unchecked Sendable`: written inside a `performAndWait`, read after it on the same thread.
private final class GoneProbe: @unchecked Sendable {
    weak var context: ManagedObjectContext?
    weak var backing: ObjectBacking?
}

/// The identity map: one instance per row while the app holds it, and no entry once the app
/// lets go (Core Data's registered objects). Entries leave with their objects; nothing is
/// swept, and no weak reference is involved.
@Suite("The registry of a context", .timeLimit(.minutes(5)))
struct RegistryTests {
    private static func seed(_ container: PersistentContainer, count: Int) throws {
        try container.newBackgroundContext().performAndWait { context in
            for i in 0..<count {
                context.insert(Book(isbn: String(format: "isbn-%05d", i), title: "Book \(i)", pages: i))
            }
            try context.save()
            // Saved inserts are clean now: nothing holds them, so nothing stays registered.
            #expect(context.identityMap.isEmpty)
        }
    }

    @Test("Objects the app lets go of leave the registry; held ones stay, one instance per row", arguments: StoreKind.allCases)
    func entriesLeaveWithTheirObjects(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        try Self.seed(container, count: 2_000)
        try container.newBackgroundContext().performAndWait { context in
            let request = FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])
            do {
                let books = try context.fetch(request)
                #expect(books.count == 2_000)
                // Held to here: an optimized build may release an array after its last use.
                withExtendedLifetime(books) { #expect(context.identityMap.count == 2_000) }
            }
            // With weak references, 2,000 dead entries (and their side tables) stayed here.
            #expect(context.identityMap.isEmpty)
            #expect(context.registeredObjects.isEmpty)

            var kept: [Book] = []
            do {
                let books = try context.fetch(request)
                kept = Array(books.prefix(10))
                kept[0].title = "Changed"          // unsaved changes hold the object too
            }
            #expect(context.identityMap.count == 10)
            let again = try context.fetch(request)
            #expect(again.count == 2_000)
            #expect(zip(kept, again).allSatisfy { $0 === $1 })
            #expect(again[0].title == "Changed")
            kept = []
            #expect(context.identityMap.count == 2_000)
            _ = consume again
            // The changed object is held by the context until it is saved.
            #expect(context.identityMap.count == 1)
            try context.save()
            #expect(context.identityMap.isEmpty)

            // Faults made from IDs and through relationships' targets leave the same way.
            let ids = try context.fetchIDs(request)
            do {
                let faults = try ids.prefix(100).map { try context.object(with: $0) }
                #expect(faults.allSatisfy { $0.isFault })
                #expect(faults.map(\.pages) == Array(0..<100))
                withExtendedLifetime(faults) { #expect(context.identityMap.count == 100) }
            }
            #expect(context.identityMap.isEmpty)
        }
    }

    @Test("Inserted, deleted and rolled-back objects leave no entries behind", arguments: StoreKind.allCases)
    func changesLeaveNoEntries(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        try Self.seed(container, count: 50)
        try container.newBackgroundContext().performAndWait { context in
            do {
                for i in 0..<20 { context.insert(Book(isbn: "new-\(i)", title: "New \(i)", pages: 1_000)) }
                for book in try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages < 10 })) {
                    context.delete(book)
                }
            }
            #expect(context.identityMap.count == 30)   // held by the context's unsaved changes
            context.rollback()
            #expect(context.identityMap.isEmpty)   // restored deletions are clean again, and unheld
            do {
                for i in 0..<20 { context.insert(Book(isbn: "new-\(i)", title: "New \(i)", pages: 1_000)) }
                for book in try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages < 10 })) {
                    context.delete(book)
                }
            }
            try context.save()
            #expect(context.identityMap.isEmpty)
            #expect(try context.count(for: FetchRequest<Book>()) == 60)
        }
    }

    @Test("An object's backing is freed with the object, whether Loom made the object for a row or the app made it", arguments: StoreKind.allCases)
    func backingsGoWithTheirObjects(kind: StoreKind) throws {
        // The slot owns its backing by hand (an Unmanaged reference, which getters use without
        // retaining it): this checks that it lets go of it, once, on both paths.
        let container = try kind.makeContainer()
        try Self.seed(container, count: 3)
        try container.newBackgroundContext().performAndWait { context in
            weak var fetched: ObjectBacking?
            weak var made: ObjectBacking?
            do {
                let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
                #expect(books.map(\.title) == ["Book 0", "Book 1", "Book 2"])
                let book = Book(isbn: "made", title: "Made", pages: 1)   // its backing is made on first use
                #expect(book.title == "Made")
                fetched = books[0]._loomBacking
                made = book._loomBacking
                withExtendedLifetime((books, book)) { #expect(fetched != nil && made != nil) }
            }
            #expect(fetched == nil)
            #expect(made == nil)
            #expect(context.identityMap.isEmpty)
            // The rows are read again into new objects and backings.
            #expect(try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.pages) == [0, 1, 2])
        }
    }

    @Test("A failed save restores the registry: every changed object is still found by its ID")
    func failedSaveRestoresEntries() throws {
        let container = try StoreKind.sqlite.makeContainer()
        try Self.seed(container, count: 5)
        try container.newBackgroundContext().performAndWait { context in
            let book = try #require(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages == 1 })).first)
            book.title = "Mine"
            // Another context changes the same row: with the default policy the save fails.
            try container.newBackgroundContext().performAndWait { other in
                let same = try #require(try other.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages == 1 })).first)
                same.title = "Theirs"
                try other.save()
            }
            let duplicate = Book(isbn: "isbn-00002", title: "Duplicate")
            context.insert(duplicate)
            #expect(throws: LoomError.self) { try context.save() }
            #expect(context.registeredObject(for: book.objectID) === book)
            #expect(context.registeredObject(for: duplicate.objectID) === duplicate)
            #expect(context.identityMap.count == 2)
        }
    }

    @Test("Objects of entities without a class leave the registry too")
    func dynamicObjectsLeave() throws {
        let memo = EntityDescription(name: "Memo", modelType: nil, attributes: [
            AttributeDescription(name: "text", type: .string, isOptional: false),
        ])
        let container = PersistentContainer(store: InMemoryStore(schema: try Schema([memo])))
        try container.newBackgroundContext().performAndWait { context in
            let entity = try context.coordinator.schema.requireEntity(named: "Memo")
            for i in 0..<30 {
                let object = try DynamicObject(entity: entity, context: context)
                object["text"] = .text("memo \(i)")
            }
            try context.save()
            #expect(context.identityMap.isEmpty)
            do {
                let memos = try context.fetch(DynamicFetchRequest(entityName: "Memo"))
                #expect(memos.count == 30)
                // Held to here: an optimized build may release an array after its last use.
                withExtendedLifetime(memos) { #expect(context.identityMap.count == 30) }
            }
            #expect(context.identityMap.isEmpty)
        }
    }

    @Test("An entity's objects of two classes are found, replaced and removed alike; each leaves with its object")
    func objectsOfTwoClassesInOneEntity() throws {
        let container = try StoreKind.sqlite.makeContainer()
        try container.newBackgroundContext().performAndWait { context in
            let entity = try context.coordinator.schema.requireEntity(named: "Book")
            do {
                let model = Book(isbn: "1", title: "Model")
                context.insert(model)
                // A DynamicObject of the same entity goes to the table's second dictionary.
                let dynamic = try DynamicObject(entity: entity, context: context)
                dynamic["isbn"] = .text("2")
                dynamic["title"] = .text("Dynamic")
                let modelKey = RowCacheKey(entity: ObjectIdentifier(entity), key: model._loomBacking.key)
                let dynamicKey = RowCacheKey(entity: ObjectIdentifier(entity), key: dynamic._loomBacking.key)
                #expect(context.identityMap.count == 2)
                #expect(context.identityMap.object(for: modelKey) === model)
                #expect(context.identityMap.object(for: dynamicKey) === dynamic)
                #expect(context.identityMap.backing(for: dynamicKey) === dynamic._loomBacking)
                #expect(context.identityMap.entries.count == 2)
                #expect(context.identityMap.problems(in: context).isEmpty)
                try context.save()
                #expect(context.identityMap.problems(in: context).isEmpty)
                // Held to here, then released: both entries leave with their objects.
                withExtendedLifetime((model, dynamic)) {}
            }
            #expect(context.identityMap.isEmpty)
            // Fetched again, both rows come back as Books, filed in the table's first dictionary.
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
            #expect(books.map(\.title) == ["Model", "Dynamic"])
            // Held while counted: an optimized build releases `books` after its last use.
            withExtendedLifetime(books) {
                #expect(context.identityMap.count == 2)
                #expect(context.identityMap.problems(in: context).isEmpty)
            }
        }
    }

    @Test("Replacing an entry of one class by one of another keeps one entry per key")
    func replacingAcrossClasses() throws {
        let entity = Book.entity
        let key = RowCacheKey(entity: ObjectIdentifier(entity), key: 7)
        var map = IdentityMap()
        let first = ObjectBacking(entity: entity), second = ObjectBacking(entity: entity), third = ObjectBacking(entity: entity)
        first.key = 7; second.key = 7; third.key = 7
        let model = Book(backing: first), dynamic = DynamicObject(backing: second), again = Book(backing: third)
        withExtendedLifetime((model, dynamic, again)) {
            map.insert(model, first, at: key)
            map.insert(dynamic, second, at: key)
            #expect(map.count == 1)
            #expect(map.object(for: key) === dynamic)
            // A destroyed object's entry leaves only if it is still that object's.
            map.removeEntry(of: first, at: key)
            #expect(map.count == 1)
            map.insert(again, third, at: key)
            #expect(map.count == 1)
            #expect(map.object(for: key) === again)
            map.removeEntry(of: second, at: key)
            #expect(map.count == 1)
            map.removeEntry(of: third, at: key)
            #expect(map.isEmpty && map.entries.isEmpty)
        }
    }

    @Test("A class conforming by hand stays registered, held by its context, until reset")
    func handWrittenConformanceIsHeld() throws {
        let container = try StoreKind.sqlite.makeContainer(HandWrittenNote.self)
        try container.newBackgroundContext().performAndWait { context in
            var id: ObjectID<HandWrittenNote>?
            do {
                let note = HandWrittenNote(backing: ObjectBacking(entity: HandWrittenNote.entity))
                context.insert(note)
                note.text = "kept"
                try context.save()
                id = note.objectID
            }
            let noteID = try #require(id)
            // It cannot leave the registry by itself, so the context keeps it alive.
            #expect(context.identityMap.count == 1)
            #expect((context.registeredObject(for: noteID))?.text == "kept")
            context.retainsRegisteredObjects = true
            context.retainsRegisteredObjects = false
            #expect((context.registeredObject(for: noteID))?.text == "kept")
            let fetched = try context.fetch(FetchRequest<HandWrittenNote>())
            #expect(fetched.count == 1 && fetched[0] === context.registeredObject(for: noteID))
            context.reset()
            #expect(context.identityMap.isEmpty && context.identityMap.heldCount == 0)
        }
    }

    @Test("A second fetch reuses registered objects: loaded ones stay as they are, faults get newer rows", arguments: StoreKind.allCases)
    func refetchReusesRegisteredObjects(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        try Self.seed(container, count: 20)
        let request = FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])
        try container.newBackgroundContext().performAndWait { context in
            var faultsRequest = request
            faultsRequest.returnsObjectsAsFaults = true
            let faults = try context.fetch(faultsRequest)
            var loadedRequest = request
            loadedRequest.returnsObjectsAsFaults = false
            let loaded = try context.fetch(loadedRequest)
            #expect(zip(faults, loaded).allSatisfy { $0 === $1 })
            #expect(loaded.allSatisfy { !$0.isFault })

            let context2 = container.newBackgroundContext()
            try context2.performAndWait { other in
                let books = try other.fetch(request)
                books[1].title = "Changed elsewhere"
                books[2].title = "Also changed"
                try other.save()
            }
            // Loaded objects are not overwritten by a fetch (Core Data's default).
            let again = try context.fetch(loadedRequest)
            #expect(zip(again, loaded).allSatisfy { $0 === $1 })
            #expect(again[1].title == "Book 1")
            try context.refresh(again[1], mergeChanges: false)
            #expect(again[1].title == "Changed elsewhere")
        }
        try container.newBackgroundContext().performAndWait { context in
            var faultsRequest = request
            faultsRequest.returnsObjectsAsFaults = true
            let faults = try context.fetch(faultsRequest)
            try container.newBackgroundContext().performAndWait { other in
                let books = try other.fetch(request)
                books[3].title = "Newer"
                try other.save()
            }
            // A fault holding an older row takes the newer one the second fetch read.
            let again = try context.fetch(faultsRequest)
            #expect(zip(again, faults).allSatisfy { $0 === $1 })
            #expect(again.allSatisfy { $0.isFault })
            #expect(again.map(\.title) == (0..<20).map { $0 == 1 ? "Changed elsewhere" : $0 == 2 ? "Also changed" : $0 == 3 ? "Newer" : "Book \($0)" })
        }
    }

    @Test("A row read before a save changed or deleted it does not enter the shared cache after that save", arguments: StoreKind.allCases)
    func rowsReadBeforeASaveStayOutOfTheCache(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        try Self.seed(container, count: 3)
        let coordinator = container.coordinator
        let entity = try coordinator.schema.requireEntity(named: "Book")
        let keys = try coordinator.store.fetchKeys(StoreQuery(entity: entity)).sorted()
        // Read, as a fetch does, before two saves: one changes a row, one deletes another.
        let generation = coordinator.currentGeneration
        let stale = try coordinator.store.rows(of: entity, keys: keys)
        try container.newBackgroundContext().performAndWait { context in
            var request = FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])
            request.returnsObjectsAsFaults = false   // loaded at once: the shared cache stays empty
            let books = try context.fetch(request)
            #expect(coordinator.cachedRow(of: entity, key: keys[0]) == nil)
            books[0].title = "Changed"
            context.delete(books[1])
            try context.save()
        }
        coordinator.cache(stale, of: entity, readAt: generation)
        #expect(coordinator.cachedRow(of: entity, key: keys[0]) == nil)
        #expect(coordinator.cachedRow(of: entity, key: keys[1]) == nil)
        // The row no save touched is cached; so is one read after the saves.
        #expect(coordinator.cachedRow(of: entity, key: keys[2])?.values == stale[2].values)
        let fresh = try coordinator.store.rows(of: entity, keys: [keys[0]])
        coordinator.cache(fresh, of: entity, readAt: coordinator.currentGeneration)
        #expect(coordinator.cachedRow(of: entity, key: keys[0])?.values == fresh[0].values)
    }

    @Test("The SQLite store leaves out the values of rows the caller already has")
    func storeSkipsKnownRows() throws {
        let container = try StoreKind.sqlite.makeContainer()
        try Self.seed(container, count: 10)
        let store = container.coordinator.store
        let query = StoreQuery(entity: Book.entity, sortKeys: [SortKey(attributeIndex: 0, ascending: true)])
        var asked: [Int64] = []
        let rows = try store.fetch(query) { key, version in
            asked.append(key)
            #expect(version >= 1)
            return key % 2 == 0
        }
        #expect(asked == rows.map(\.key) && rows.count == 10)
        for row in rows {
            #expect(row.values.count == (row.key % 2 == 0 ? 0 : Book.entity.storedValueCount))
        }
        #expect(try store.fetch(query).allSatisfy { $0.values.count == Book.entity.storedValueCount })
    }

    @Test("A store that leaves out values it was not asked to leave out is an error, not a crash")
    func storeSkippingTooMuchIsAnError() throws {
        let inner = InMemoryStore(schema: try Schema([Book.self, Shelf.self, Sample.self, Tally.self]))
        let container = PersistentContainer(store: SkipsEveryRowStore(inner))
        try Self.seed(container, count: 5)
        try container.newBackgroundContext().performAndWait { context in
            let kept = try #require(try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).first)
            #expect(context.identityMap.count == 1)
            // The second fetch asks to leave out only `kept`'s row; this store leaves out all.
            let error = try #require(throws: LoomError.self) { try context.fetch(FetchRequest<Book>()) }
            #expect(error.code == .corruptValue)
            #expect(error.message.contains("Book"))
            #expect(kept.title == "Book 0")
        }
    }

    @Test("With retainsRegisteredObjects on, objects that leave the context are released, not kept held", arguments: StoreKind.allCases)
    func heldObjectsLeaveWithTheirEntries(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        try Self.seed(container, count: 10)
        try container.newBackgroundContext().performAndWait { context in
            context.retainsRegisteredObjects = true
            weak var rolledBack: Book?
            weak var deleted: Book?
            do {
                let book = Book(isbn: "new", title: "Rolled back")
                context.insert(book)
                rolledBack = book
            }
            context.rollback()
            #expect(rolledBack == nil)              // before, the held entry outlived the rollback
            do {
                let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
                #expect(context.identityMap.heldCount == 10)
                deleted = books[0]
                context.delete(books[0])
            }
            try context.save()
            #expect(deleted == nil)
            #expect(context.identityMap.count == 9 && context.identityMap.heldCount == 9)
            #expect(context.identityMap.problems(in: context).isEmpty)
            context.retainsRegisteredObjects = false
            #expect(context.identityMap.isEmpty && context.identityMap.heldCount == 0)
        }
    }

    @Test("Entries are filed per entity: equal keys of two entities are two objects", arguments: StoreKind.allCases)
    func entriesArePerEntity(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        try container.newBackgroundContext().performAndWait { context in
            let authors = (0..<5).map { Author(name: "Author \($0)") }
            let novels = (0..<5).map { Novel(title: "Novel \($0)") }
            for author in authors { context.insert(author) }
            for novel in novels { context.insert(novel) }
            try context.save()
            #expect(context.identityMap.count == 10)
            for (author, novel) in zip(authors, novels) {
                #expect(context.registeredObject(for: author.objectID) === author)
                #expect(context.registeredObject(for: novel.objectID) === novel)
            }
            // Whatever keys the store gave, a lookup never crosses entities.
            let authorKeys = Set(authors.map(\.objectID.primaryKey))
            for novel in novels where authorKeys.contains(novel.objectID.primaryKey) {
                let author = try #require(authors.first { $0.objectID.primaryKey == novel.objectID.primaryKey })
                #expect(context.registeredObject(for: author.objectID) !== context.registeredObject(for: novel.objectID))
            }
            #expect(context.identityMap.problems(in: context).isEmpty)
        }
    }

    @Test("The identity map's check names an entry filed under the wrong row")
    func invariantCheckFindsMisfiledEntries() throws {
        let container = try StoreKind.inMemory.makeContainer()
        container.newBackgroundContext().performAndWait { context in
            let book = Book(isbn: "1", title: "Filed", pages: 1)
            context.insert(book)
            #expect(context.identityMap.problems(in: context).isEmpty)
            let wrong = RowCacheKey(entity: ObjectIdentifier(book._loomBacking.entity), key: book.objectID.primaryKey + 1_000)
            context.identityMap.insert(book, book._loomBacking, at: wrong)
            let problems = context.identityMap.problems(in: context)
            #expect(problems.contains { $0.contains("filed under key \(wrong.key)") && $0.contains("Book") })
            context.identityMap.remove(wrong)
            #expect(context.identityMap.problems(in: context).isEmpty)
        }
    }

    @Test("Objects kept after their queue's context is gone find no context; those it held are freed with it", arguments: StoreKind.allCases)
    func objectsOutliveTheirQueueContext(kind: StoreKind) throws {
        // An object never keeps its context alive, and finds it gone once it is: those the app
        // kept, and those the context itself held (unsaved, or all with retainsRegisteredObjects),
        // which its end releases. Any way of referring to the context must keep this (an object
        // reaching a freed context here crashes the test).
        let container = try kind.makeContainer()
        try Self.seed(container, count: 3)
        var background: BackgroundContext? = container.newBackgroundContext(name: "going")
        let probe = GoneProbe()
        let kept = try background!.performAndWait { context in
            probe.context = context
            context.retainsRegisteredObjects = true
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
            #expect(books[0].title == "Book 0")                   // loaded; books[1] stays a fault
            let unsaved = Book(isbn: "new", title: "Unsaved", pages: 9)
            context.insert(unsaved)
            do {
                let onlyInContext = Book(isbn: "held", title: "Held by the context only", pages: 1)
                context.insert(onlyInContext)
                probe.backing = onlyInContext._loomBacking
            }
            #expect(books.allSatisfy { $0.managedObjectContext === context })
            return UnsafeTransfer((books, unsaved))                // used below on this thread, after the context
        }
        #expect(probe.context != nil && probe.backing != nil)
        background = nil
        #expect(probe.context == nil)
        #expect(probe.backing == nil)                              // released by the context as it went
        let (books, unsaved) = kept.value
        #expect(books.allSatisfy { $0.managedObjectContext == nil })
        #expect(unsaved.managedObjectContext == nil)
        #expect(books[0].title == "Book 0")                       // its loaded values stay readable
        #expect(unsaved.title == "Unsaved")
    }

    @Test("Objects of a main-actor context released on another thread find no context on the main actor")
    @MainActor
    func objectsOutliveTheirMainActorContext() async throws {
        // The view context goes with its container, which is Sendable: its last reference can go
        // on another thread while the main actor still holds its objects.
        let container = Locked<PersistentContainer?>(try StoreKind.sqlite.makeContainer())
        try Self.seed(container.withLock { $0! }, count: 2)
        weak var gone: ManagedObjectContext?
        let (books, unsaved): ([Book], Book) = try container.withLock { container in
            let context = container!.viewContext
            gone = context
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
            #expect(books[0].title == "Book 0")
            let unsaved = Book(isbn: "new", title: "Unsaved", pages: 9)
            context.insert(unsaved)
            context.insert(Book(isbn: "held", title: "Held by the context only", pages: 1))
            return (books, unsaved)
        }
        #expect(books[0].managedObjectContext === gone)
        await Task.detached { container.withLock { $0 = nil } }.value
        #expect(gone == nil)
        #expect(books.allSatisfy { $0.managedObjectContext == nil })
        #expect(unsaved.managedObjectContext == nil)
        #expect(books[0].title == "Book 0")
        #expect(unsaved.title == "Unsaved")
    }

    @Test("Objects destroyed on several contexts' queues at once leave only their own registry")
    func concurrentContextsDropObjects() async throws {
        let container = try StoreKind.sqlite.makeContainer()
        try Self.seed(container, count: 500)
        let readers = (0..<3).map { container.newBackgroundContext(name: "reader \($0)") }
        let writer = container.newBackgroundContext(name: "writer")
        for context in readers + [writer] { context.performAndWait { $0.automaticallyMergesChanges = true } }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for reader in readers {
                group.addTask {
                    var leftOver = 0
                    for round in 0..<20 {
                        leftOver += try await reader.perform { context in
                            do {
                                let books = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages % 20 == round }))
                                _ = books.reduce(0) { $0 + $1.title.count }
                            }
                            return context.identityMap.count
                        }
                    }
                    return leftOver
                }
            }
            group.addTask {
                for round in 0..<20 {
                    try await writer.perform { context in
                        for book in try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages % 20 == round })) {
                            book.title += "!"
                        }
                        try context.save()
                    }
                }
                return await writer.perform { $0.identityMap.count }
            }
            for try await leftOver in group { #expect(leftOver == 0) }
        }
    }

    @Test("Row keys and model objects hash consistently with equality, and spread over a table's buckets")
    func identityHashesAreConsistentAndSpread() {
        for seed in [0, 1, -7, Int.max] {
            for key: Int64 in [0, 1, -1, 42, .max, .min] {
                #expect(RowKey(key)._rawHashValue(seed: seed) == RowKey(key)._rawHashValue(seed: seed))
            }
        }
        // Consecutive and strided keys (as primary keys come) fill the low bits a table uses.
        for stride: Int64 in [1, 8, 1_024] {
            let buckets = Set((0..<1_024).map { RowKey(Int64($0) * stride)._rawHashValue(seed: 0) & 1_023 })
            #expect(buckets.count > 550, "stride \(stride) filled \(buckets.count) of 1,024 buckets")
        }
        var table: [RowKey: Int] = [:]
        for key in 0..<10_000 { table[RowKey(Int64(key) * 3)] = key }
        #expect(table.count == 10_000 && (0..<10_000).allSatisfy { table[RowKey(Int64($0) * 3)] == $0 })
        let books = (0..<100).map { Book(isbn: "isbn-\($0)", title: "Book", pages: $0) }
        let set = Set(books + books)
        #expect(set.count == 100 && books.allSatisfy { set.contains($0) })
    }

    @Test("A member list keeps each key once, in the order given, sorted or not")
    func memberListsKeepEachKeyOnce() {
        #expect(MemberList([1, 2, 3]).keys == [1, 2, 3])
        #expect(MemberList([3, 1, 3, 2, 1]).keys == [3, 1, 2])
        #expect(MemberList([1, 1, 2]).keys == [1, 2])
        let long = MemberList(Array(0..<40))
        #expect(long.count == 40 && long.contains(39) && !long.contains(40))
        var grown = MemberList([5])
        grown.append(5)
        grown.append(4)
        #expect(grown.keys == [5, 4])
    }

    @Test("The log of changed to-many relationships: runs of one owner's changes, removals and other owners, against a dictionary of sets")
    func relationshipChangeLogMatchesADictionary() {
        var log = RelationshipChangeLog()
        var model: [Int64: Set<Int>] = [:]
        var random = SeededGenerator(seed: 23)
        let entity = Book.entity
        for step in 0..<5_000 {
            // Runs of one owner and relationship, as setting a to-many notes them, broken by
            // removals of the owner just noted, and of others.
            let key = Int64.random(in: 1...40, using: &random)
            let relationship = Int.random(in: 0...2, using: &random)
            let repeats = Int.random(in: 1...4, using: &random)
            for _ in 0..<repeats {
                log.note(entity, key, relationship)
                model[key, default: []].insert(relationship)
            }
            if step % 5 == 4 {
                let removed = Bool.random(using: &random) ? key : Int64.random(in: 1...40, using: &random)
                log.remove(RowCacheKey(entity: ObjectIdentifier(entity), key: removed))
                model[removed] = nil
            }
            #expect(log.entries.count == model.count)
        }
        for (key, relationships) in model {
            let entry = log.entries[RowCacheKey(entity: ObjectIdentifier(entity), key: key)]
            #expect(entry?.relationships == relationships && entry?.key == key && entry?.entity === entity)
        }
    }

    @Test("Unsaved keys: noted and cleared in any order across chunks, against a Set doing the same")
    func unsavedKeysMatchASet() {
        var unsaved = UnsavedKeys()
        var model: Set<Int64> = []
        var random = SeededGenerator(seed: 11)
        let span = 3 * UnsavedKeys.chunkSize
        for step in 0..<20_000 {
            let key = Int64.random(in: 1...span, using: &random)
            if step % 3 == 2 {
                unsaved.remove(key)
                model.remove(key)
            } else {
                unsaved.insert(key)
                model.insert(key)
            }
            if step % 1_000 == 0 {
                #expect(unsaved.count == model.count)
                #expect((0...span + 1).allSatisfy { unsaved.contains($0) == model.contains($0) })
            }
        }
        // Emptied: every chunk but one goes; keys far apart still work.
        for key in model { unsaved.remove(key) }
        #expect(unsaved.count == 0 && !(1...span).contains { unsaved.contains($0) })
        unsaved.insert(1 << 40)
        #expect(unsaved.contains(1 << 40) && !unsaved.contains((1 << 40) + 1) && unsaved.count == 1)
    }

    @Test("The registry's key table agrees with a dictionary, whatever order and spread its keys come in")
    func keyedSlotsAgreeWithADictionary() {
        var random = SeededGenerator(seed: 45)
        let far = Int64(1) << 40
        let shapes: [(name: String, keys: [Int64])] = [
            ("ascending, as a fetch registers", Array(1...3_000)),
            ("descending", Array((1...3_000).reversed())),
            ("shuffled block", Array(1...3_000).shuffled(using: &random)),
            ("every third", (1...1_500).map { Int64($0) * 3 }),
            ("sparse", (0..<1_500).map { _ in Int64.random(in: 1...10_000_000, using: &random) }),
            ("a few far, then many dense", [7, 9, far, -far] + Array(100_000...102_000)),
            ("two dense runs far apart", (Array(1...1_000) + Array(far...(far + 1_500))).shuffled(using: &random)),
            ("a key the run grows over later", Array(1...10) + [500] + Array(11...499) + Array(501...600)),
            ("a dense run, then sparse keys", Array(1...2_000) + (0..<1_500).map { _ in Int64.random(in: 5_000...50_000_000, using: &random) }),
            ("extremes", [Int64.max, Int64.min, 0, 1, -1, Int64.max - 1, Int64.min + 1] + Array(1...200)),
        ]
        for (name, keys) in shapes {
            var table = KeyedSlots<Int64>()
            var model: [Int64: Int64] = [:]
            func agree(_ step: String) {
                #expect(table.count == model.count, "\(name), \(step)")
                #expect(table.problems.isEmpty, "\(name), \(step): \(table.problems)")
                #expect(Dictionary(uniqueKeysWithValues: table.map { ($0.key, $0.value) }) == model, "\(name), \(step)")
                for (key, value) in model where table[key] != value {
                    Issue.record("\(name), \(step): reading \(key) gives \(String(describing: table[key])), not \(value)")
                }
            }
            // Filed, some filed again with another value.
            for (index, key) in keys.enumerated() {
                let value = Int64(index)
                #expect(table.updateValue(value, forKey: key) == model.updateValue(value, forKey: key), "\(name): filing \(key)")
                if index % 7 == 0 {
                    #expect(table.updateValue(-value, forKey: key) == model.updateValue(-value, forKey: key), "\(name): filing \(key) again")
                }
            }
            agree("after filing")
            for key in keys + [Int64.max, Int64.min, 123_456_789, -5] where table[key] != model[key] {
                Issue.record("\(name): reading \(key) gives \(String(describing: table[key])), not \(String(describing: model[key]))")
            }
            // Every key filed once more, now that the run has grown over some of them.
            for key in keys {
                let value = (model[key] ?? 0) + 1_000_000
                #expect(table.updateValue(value, forKey: key) == model.updateValue(value, forKey: key), "\(name): filing \(key) once more")
            }
            agree("after filing once more")
            // Half taken out, in an order of their own, some only if they hold a given value.
            for (index, key) in keys.shuffled(using: &random).prefix(keys.count / 2).enumerated() {
                if index % 2 == 0 {
                    #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key), "\(name): taking \(key) out")
                } else {
                    let wanted = model[key] ?? 0
                    let taken = table.removeValue(forKey: key, where: { $0 == wanted + 1 })
                    #expect(!taken, "\(name): \(key) is taken out only if it holds the value asked for")
                    #expect(table.removeValue(forKey: key, where: { $0 == wanted }) == (model.removeValue(forKey: key) != nil))
                }
            }
            agree("after taking half out")
            // Filed again, then all taken out: the table is empty, and works again after.
            for key in keys.shuffled(using: &random).prefix(keys.count / 3) {
                #expect(table.updateValue(key, forKey: key) == model.updateValue(key, forKey: key), "\(name): refiling \(key)")
            }
            agree("after filing again")
            for key in Array(model.keys) {
                #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key))
            }
            agree("emptied")
            #expect(table.updateValue(1, forKey: 5) == nil && table[5] == 1 && table.count == 1)
        }
    }

    @Test("Keys filed in a dense run are found by position, even after a few far from them")
    func denseKeysFillTheRun() {
        var table = KeyedSlots<Int64>()
        // Settings kept from before, then a fetch of 20,000 neighbouring rows.
        for key: Int64 in [3, 4, 900_000_000] { table.updateValue(key, forKey: key) }
        for key in Int64(50_000)..<70_000 { table.updateValue(key, forKey: key) }
        #expect(table.count == 20_003)
        #expect(table.runCount >= 20_000)
        #expect(table.problems.isEmpty)
        #expect(table[3] == 3 && table[900_000_000] == 900_000_000 && table[69_999] == 69_999 && table[70_000] == nil)
        // Rows every third key (the others deleted) still share the run.
        var thirds = KeyedSlots<Int64>()
        for key in stride(from: Int64(1), through: 30_000, by: 3) { thirds.updateValue(key, forKey: key) }
        #expect(thirds.runCount == thirds.count)
        // Keys spread far apart do not: the run never spans more than four slots a key and a few.
        var spread = KeyedSlots<Int64>()
        for key in stride(from: Int64(0), to: 10_000_000, by: 10_000) { spread.updateValue(key, forKey: key) }
        #expect(spread.count == 1_000 && spread.runCount < 10)
    }

    @Test("Objects registered with dense, sparse and far keys are found, counted and leave the registry")
    func registryWithKeysOfEveryShape() {
        let entity = Book.entity
        let keys: [Int64] = Array(1...300) + [5_000_000, 1 << 40, -9, Int64.max] + stride(from: Int64(10_000), to: 1_000_000, by: 7_919).map { $0 }
        var map = IdentityMap()
        let books = keys.map { key in
            let backing = ObjectBacking(entity: entity)
            backing.key = key
            return (key, Book(backing: backing), backing)
        }
        withExtendedLifetime(books) {
            for (key, book, backing) in books {
                map.insert(book, backing, at: RowCacheKey(entity: ObjectIdentifier(entity), key: key))
            }
            #expect(map.count == keys.count)
            #expect(books.allSatisfy { map.object(for: RowCacheKey(entity: ObjectIdentifier(entity), key: $0.0)) === $0.1 })
            #expect(Set(map.entries.map(\.backing.key)) == Set(keys))
            for (key, _, backing) in books where key % 2 == 0 {
                map.removeEntry(of: backing, at: RowCacheKey(entity: ObjectIdentifier(entity), key: key))
            }
            #expect(map.count == keys.filter { $0 % 2 != 0 }.count)
            #expect(books.allSatisfy { (map.backing(for: RowCacheKey(entity: ObjectIdentifier(entity), key: $0.0)) != nil) == ($0.0 % 2 != 0) })
            for (key, _, _) in books { map.remove(RowCacheKey(entity: ObjectIdentifier(entity), key: key)) }
            #expect(map.isEmpty && map.entries.isEmpty)
        }
    }

    @Test("A save's inserted objects go to the store in key order, whether their keys are dense, sparse or extreme")
    func insertedObjectsAreOrderedByKey() {
        var random = SeededGenerator(seed: 5)
        let entity = Book.entity
        for keys: [Int64] in [
            Array(1...1_000).shuffled(using: &random),                       // one block, as inserts make
            (0..<500).map { _ in Int64.random(in: 1...1_000_000, using: &random) },   // sparse
            [Int64.max, 1, Int64.min + 1, 0, 7],                              // a span that overflows
            [42],
        ] {
            let distinct = Array(Set(keys))
            let backings = distinct.map { key in
                let b = ObjectBacking(entity: entity)
                b.key = key
                return b
            }
            #expect(SaveOperation.sortedByKey(backings) { $0.key }.map(\.key) == distinct.sorted())
        }
    }

    @Test("New objects nobody else holds are freed by their save in the order they were inserted", arguments: [StoreKind.inMemory, .sqlite])
    @MainActor func savedObjectsAreFreedInInsertionOrder(kind: StoreKind) throws {
        let container = try kind.makeContainer(FreedInOrder.self)
        let context = container.viewContext
        FreedInOrder.freed.withLock { $0 = [] }
        for n in 0..<2_000 { context.insert(FreedInOrder(n: n)) }
        #expect(FreedInOrder.freed.withLock { $0 }.isEmpty)   // the pending changes hold them
        try context.save()
        #expect(FreedInOrder.freed.withLock { $0 } == Array(0..<2_000))
        #expect(context.identityMap.isEmpty)
    }

    @Test("A save lists its new objects entity by entity in schema order, each by key, whether the keys are dense or not")
    @MainActor func insertedObjectsAreListedBySchemaAndKey() throws {
        let container = try StoreKind.inMemory.makeContainer()
        let context = container.viewContext
        let schemaOrder = container.coordinator.schema.entities.map(ObjectIdentifier.init)
        var random = SeededGenerator(seed: 17)
        func listed(_ keys: [(shelf: Bool, key: Int64)]) -> [(entity: ObjectIdentifier, key: Int64)] {
            var inserted: [RowCacheKey: any BackedObject] = [:]
            for (isShelf, key) in keys {
                let object: any BackedObject = isShelf ? Shelf(room: "R", position: Int(key)) : Book(isbn: "\(key)", title: "T")
                object._loomBacking.key = key
                inserted[RowCacheKey(entity: ObjectIdentifier(object._loomBacking.entity), key: key)] = object
            }
            context.pending.inserted = inserted
            defer { context.pending = PendingChanges() }
            let list = SaveOperation(context, mergingIntoViewContext: false).insertedInOrder()
            // Each object once, with its own backing.
            #expect(Set(list.map { ObjectIdentifier($0.object) }) == Set(inserted.values.map { ObjectIdentifier($0) }))
            #expect(list.allSatisfy { $0.object._loomBacking === $0.backing })
            return list.map { (ObjectIdentifier($0.backing.entity), $0.backing.key) }
        }
        func expected(_ keys: [(shelf: Bool, key: Int64)]) -> [(entity: ObjectIdentifier, key: Int64)] {
            keys.map { (ObjectIdentifier($0.shelf ? Shelf.entity : Book.entity), $0.key) }
                .sorted { a, b in
                    let ra = schemaOrder.firstIndex(of: a.entity)!, rb = schemaOrder.firstIndex(of: b.entity)!
                    return ra != rb ? ra < rb : a.key < b.key
                }
        }
        let dense = Array(1...300).map { (shelf: $0 % 3 == 0, key: Int64($0)) }.shuffled(using: &random)
        let denseApart = (Array(1...200).map { (shelf: false, key: Int64($0)) } + Array(1_001...1_050).map { (shelf: true, key: Int64($0)) }).shuffled(using: &random)
        let sparse = (0..<200).map { i in (shelf: i % 2 == 0, key: Int64(i) * 1_000 + Int64.random(in: 0..<1_000, using: &random)) }
        let oneEntitySparse = [(shelf: false, key: Int64.max), (shelf: false, key: 1), (shelf: false, key: Int64.min + 1), (shelf: false, key: 0)]
        let oneSparseOneDense = Array(1...100).map { (shelf: false, key: Int64($0)) } + [(shelf: true, key: Int64(5)), (shelf: true, key: Int64(5_000_000))]
        for keys in [dense, denseApart, sparse, oneEntitySparse, oneSparseOneDense, [(shelf: true, key: Int64(7))]] {
            let got = listed(keys), want = expected(keys)
            #expect(got.map(\.entity) == want.map(\.entity))
            #expect(got.map(\.key) == want.map(\.key))
        }
    }
}

/// A store that answers every skipping fetch with rows without values (a broken store).
final class SkipsEveryRowStore: PersistentStore {
    let inner: InMemoryStore
    init(_ inner: InMemoryStore) { self.inner = inner }
    var identifier: UUID { inner.identifier }
    var schema: Schema { inner.schema }
    func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] { try inner.fetch(query) }
    func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try inner.fetch(query).map { row in
            _ = isKnown(row.key, row.version)
            return StoreRow(key: row.key, version: row.version, values: [])
        }
    }
    func count(_ query: StoreQuery) throws(LoomError) -> Int { try inner.count(query) }
    func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] { try inner.rows(of: entity, keys: keys) }
    func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] { try inner.fetchRelated(relationship, keys: keys) }
    func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt { try inner.apply(changes) }
    func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) { try inner.withWriteTransaction(body) }
    var lastCommitSequence: UInt64 { inner.lastCommitSequence }
    var writeScope: WriteScope { inner.writeScope }
    func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> { try inner.allocateKeys(for: entity, count: count) }
    func close() throws(LoomError) { try inner.close() }
}
