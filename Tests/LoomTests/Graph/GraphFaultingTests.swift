import Foundation
import Loom
import Testing

/// Faulting across relationships: what loads when, with how many queries, and what a fault
/// whose row is gone does.
@MainActor
@Suite("Graph faulting")
struct GraphFaultingTests {
    /// `count` novels, each by its own author, each with one tag.
    func populate(_ container: PersistentContainer, count: Int) throws {
        try container.newBackgroundContext().performAndWait { context in
            for i in 0..<count {
                let novel = Novel(title: "N\(i)", pages: i, author: Author(name: "A\(i)"))
                novel.tags = [Tag(name: "T\(i)")]
                context.insert(novel)             // inserts its author and tag too
            }
            try context.save()
        }
    }

    /// A container on a SQLite file that another container wrote `count` novels to (so its
    /// shared row cache starts empty), logging every statement it runs.
    func tracedContainer(populatedWith count: Int) async throws -> (PersistentContainer, StatementLog) {
        let url = TemporaryDirectory.make().appending(path: "graph.loom")
        let schema = try Schema(StoreKind.graphTypes)
        let writer = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        try populate(writer, count: count)
        try await writer.close()
        let log = StatementLog()
        return (PersistentContainer(store: try SQLiteStore(url: url, schema: schema, options: .init(trace: log.hook))), log)
    }

    @Test("A fetched object's to-one is a fault until touched; a to-many loads when first read", arguments: StoreKind.allCases)
    func faultsUntilTouched(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        try container.newBackgroundContext().performAndWait { context in
            let ann = Author(name: "Ann")
            context.insert(ann)
            for i in 0..<3 { context.insert(Novel(title: "N\(i)", author: ann)) }
            try context.save()
        }
        let context = container.viewContext
        let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
        let author = try #require(novels[0].author)
        #expect(author.isFault)
        #expect(novels.allSatisfy { $0.author === author })   // one instance per object
        #expect(author.name == "Ann")
        #expect(!author.isFault)
        #expect(author.novels.count == 3)
    }

    @Test("Fetched faults fire from the rows their fetch read, unless a save changed or deleted them since", arguments: StoreKind.allCases)
    func fetchedRowFaults(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        try populate(container, count: 3)
        let reader = container.newBackgroundContext(name: "reader")   // does not merge
        let writer = container.newBackgroundContext(name: "writer")
        let titles = try await reader.perform { context in
            context.retainsRegisteredObjects = true     // the faults outlive this block
            let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
            #expect(novels.allSatisfy { $0.isFault })
            let first = novels[0].title                 // fires from the fetched row
            #expect(!novels[0].isFault && novels[1].isFault && novels[2].isFault)
            return first
        }
        #expect(titles == "N0")
        try await Self.renameSecondAndDeleteThird(in: writer)
        // The faults fetched before the save never show what the save replaced.
        #expect(await Self.titlesFiringFaults(in: reader) == "N0,changed,deleted")
    }

    @Test("A fetched fault reads its row again only after saves since its own fetch, not since its context's first", arguments: StoreKind.allCases)
    func faultsAgeFromTheirOwnFetch(kind: StoreKind) async throws {
        let (container, store) = try kind.makeCountingContainer()
        try await container.performBackgroundTask { context in
            for key in ["a", "b", "c"] { context.insert(Tally(key: key)) }
            try context.save()
        }
        let reader = container.newBackgroundContext(name: "reader")   // does not merge
        try await reader.perform { context in
            context.retainsRegisteredObjects = true     // the faults outlive each block
            // The first fetch: its fault's row is the oldest the context holds.
            let first = try context.fetch(FetchRequest<Tally>(predicate: #Predicate { $0.key == "a" }))
            #expect(first.count == 1 && first[0].isFault)
        }
        try await Self.setA(of: ["a", "b"], to: 1, in: container)
        try await reader.perform { context in
            // After that save: these rows are current, the fault of "a" takes its new one.
            let all = try context.fetch(FetchRequest<Tally>(sortBy: [SortDescriptor(\.key)]))
            #expect(all.count == 3 && all.allSatisfy { $0.isFault })
        }
        try await Self.setA(of: ["c"], to: 2, in: container)
        let (values, reads) = await reader.perform { context in
            store.reset()
            let all = context.registeredObjects.compactMap { $0 as? Tally }.sorted { $0.key < $1.key }
            return (all.map(\.a), store.counts.rows)
        }
        #expect(values == [1, 1, 2])   // never a value a save replaced
        // Only "c" changed after the fetch that made its fault. Before each fault kept its own
        // generation, "a" and "b" (changed after the context's first fetch) were read again too
        // (3 reads).
        #expect(reads == 1)
    }

    @Test("Members prefetched before the context's first fetch of faults still read again the rows a save changed after their own query", arguments: StoreKind.allCases)
    func prefetchedMembersAgeFromTheirQuery(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        try await container.performBackgroundTask { context in
            let ann = Author(name: "Ann")
            context.insert(ann)
            for i in 0..<3 { context.insert(Novel(title: "N\(i)", author: ann)) }
            try context.save()
        }
        let reader = container.newBackgroundContext(name: "reader")   // does not merge
        try await reader.perform { context in
            context.retainsRegisteredObjects = true     // the author and its member list outlive this block
            // Loaded authors make no faults; the prefetch keeps the members' rows, read now.
            var request = FetchRequest<Author>()
            request.returnsObjectsAsFaults = false
            request.relationshipKeyPathsForPrefetching = [\.novels]
            let authors = try context.fetch(request)
            #expect(authors.count == 1)
        }
        try await Self.renameSecondAndDeleteThird(in: container.newBackgroundContext(name: "writer"))
        try await reader.perform { context in
            // The context's first fetch of faults comes after that save; then the members' faults
            // are made from the rows read before it, which must count as that old.
            let authors = try context.fetch(FetchRequest<Author>())
            #expect(authors.count == 1 && authors[0].novels.count == 3)
        }
        #expect(await Self.titlesFiringFaults(in: reader) == "N0,changed,deleted")
    }

    /// A new context sets `a` of the tallies with these keys and saves. (A new one each time:
    /// one that reads the rows its last save changed would put them in the shared row cache.)
    private static func setA(of keys: [String], to value: Int, in container: PersistentContainer) async throws {
        try await container.performBackgroundTask { context in
            for tally in try context.fetch(FetchRequest<Tally>()) where keys.contains(tally.key) { tally.a = value }
            try context.save()
        }
    }

    /// Another context renames the second novel by title to "changed", deletes the third, saves.
    private static func renameSecondAndDeleteThird(in writer: BackgroundContext) async throws {
        try await writer.perform { context in
            let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
            novels[1].title = "changed"
            context.delete(novels[2])
            try context.save()
        }
    }

    /// The titles of the novels registered in `reader`, in key order, read by firing their
    /// faults; "deleted" for one whose row is gone.
    private static func titlesFiringFaults(in reader: BackgroundContext, first count: Int = .max) async -> String {
        await reader.perform { context in
            let all = context.registeredObjects.compactMap { $0 as? Novel }.sorted { $0.anyObjectID.primaryKey < $1.anyObjectID.primaryKey }
            return all.prefix(count).map { novel in
                let title = novel.title                // fires the fault
                return novel.isDeleted ? "deleted" : title
            }.joined(separator: ",")
        }
    }

    @Test("A to-many relationship's members fire from the rows its fault read, unless a save changed or deleted them since", arguments: StoreKind.allCases)
    func toManyMembersHoldTheirRows(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let annID = try await container.performBackgroundTask { context in
            let ann = Author(name: "Ann")
            context.insert(ann)
            for i in 0..<3 { context.insert(Novel(title: "N\(i)", author: ann)) }
            // An ordered relationship: its order is not the rows' key order.
            let novel = Novel(title: "Ordered", author: ann)
            context.insert(novel)
            novel.chapters = (0..<4).reversed().map { Chapter(title: "C\($0)") }
            try context.save()
            return ann.objectID
        }
        let reader = container.newBackgroundContext(name: "reader")   // does not merge
        let writer = container.newBackgroundContext(name: "writer")
        let first = try await reader.perform { context in
            context.retainsRegisteredObjects = true     // the members outlive this block
            // No fetch before: the relationship's own query is the first whose rows faults hold.
            let ann = try context.existingObject(with: annID)
            let novels = ann.novels.sorted { $0.anyObjectID.primaryKey < $1.anyObjectID.primaryKey }
            #expect(novels.count == 4 && novels.allSatisfy { $0.isFault })
            #expect(novels[3].chapters.map(\.title) == ["C3", "C2", "C1", "C0"])
            #expect(!novels[3].isFault && novels[1].isFault && novels[2].isFault)
            return novels[0].title                      // fires from the row the fault read
        }
        #expect(first == "N0")
        try await Self.renameSecondAndDeleteThird(in: writer)
        #expect(await Self.titlesFiringFaults(in: reader, first: 3) == "N0,changed,deleted")
    }

    @Test("Loaded to-many lists stay exact as members come and go, short and long", arguments: [3, 16, 17, 40])
    func memberListsStayExact(count: Int) throws {
        let container = try StoreKind.sqlite.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        context.insert(ann)
        for i in 0..<count { context.insert(Novel(title: "N\(i)", author: ann)) }
        try context.save()
        context.reset()
        let author = try #require(try context.fetch(FetchRequest<Author>()).first)
        var expected = Set(author.novels.map(\.title))
        #expect(expected.count == count)
        // Remove every third member, add some new ones, and add an existing member again.
        for novel in author.novels where Int(novel.title.dropFirst())! % 3 == 0 {
            novel.author = nil
            expected.remove(novel.title)
        }
        for i in 0..<5 {
            let novel = Novel(title: "New\(i)")
            context.insert(novel)
            novel.author = author
            expected.insert(novel.title)
        }
        if let first = author.novels.first { first.author = author }
        #expect(Set(author.novels.map(\.title)) == expected)
        #expect(author.novels.count == expected.count)
        try context.save()
        let other = container.newBackgroundContext()
        let saved = try other.performAndWait { context in
            Set(try context.fetch(FetchRequest<Author>()).first?.novels.map(\.title) ?? [])
        }
        #expect(saved == expected)
    }

    @Test("A to-many fault is one query; prefetching loads a relationship for 1,000 objects in one query")
    func queryCounts() async throws {
        let (container, log) = try await tracedContainer(populatedWith: 1000)
        let context = container.viewContext

        // To-one, without prefetching: one query per author.
        log.reset()
        var names = 0
        for novel in try context.fetch(FetchRequest<Novel>()) { names += novel.author?.name.count ?? 0 }
        #expect(names > 0)
        let withoutToOne = log.selects.count
        #expect(withoutToOne == 1 + 1000)

        // To-one, prefetched: the fetch, then one query for all the authors.
        context.reset()
        log.reset()
        var request = FetchRequest<Novel>()
        request.relationshipKeyPathsForPrefetching = [\.author]
        for novel in try context.fetch(request) { names += novel.author?.name.count ?? 0 }
        #expect(log.selects.count == 2)
        Self.recorded["prefetch"] = log.selects.last

        // To-many, without prefetching: one query per object.
        context.reset()
        log.reset()
        var tags = 0
        for novel in try context.fetch(FetchRequest<Novel>()) { tags += novel.tags.count }
        #expect(tags == 1000)
        #expect(log.selects.count == 1 + 1000)
        Self.recorded["to-many fault"] = log.selects.last
        // One owner is bound as an integer: no JSON array, no ephemeral table in SQLite.
        #expect(log.selects.last?.contains("\"Z_SOURCE\" = ?") == true)
        #expect(log.selects.last?.contains("json_each") == false)

        // To-many, prefetched, and the tags' values: still two queries.
        context.reset()
        log.reset()
        var both = FetchRequest<Novel>()
        both.relationshipKeyPathsForPrefetching = [\.tags]
        tags = 0
        for novel in try context.fetch(both) { tags += novel.tags.map(\.name.count).reduce(0, +) }
        #expect(tags > 1000)
        #expect(log.selects.count == 2)
        Self.recorded["to-many prefetch"] = log.selects.last
        #expect(log.selects.last?.contains("json_each") == true)

        // Read, let the tags go, read again: the novels kept their members' rows, so the
        // second reading needs no query.
        context.reset()
        let novels = try context.fetch(both)
        var first = 0
        for novel in novels { first += novel.tags.map(\.name.count).reduce(0, +) }
        log.reset()
        var again = 0
        for novel in novels { again += novel.tags.map(\.name.count).reduce(0, +) }
        #expect(again == first && again > 1000)
        #expect(log.selects.isEmpty)
        for (label, sql) in Self.recorded.sorted(by: { $0.key < $1.key }) { print("SQL \(label): \(sql)") }
    }

    @Test("Delete rules load what they need with one query per relationship, not one per object")
    func deletePropagationQueries() async throws {
        let (container, log) = try await tracedContainer(populatedWith: 300)
        let context = container.viewContext
        let authors = try context.fetch(FetchRequest<Author>())
        log.reset()
        for author in authors { context.delete(author) }   // cascades to 300 novels, nullifies their tags
        context.processPendingChanges()
        #expect(context.deleted.count == 600)
        #expect(log.selects.count < 15, "\(log.selects.count) queries")
        try context.save()
        #expect(try context.count(for: FetchRequest<Novel>()) == 0)
        #expect(try context.count(for: FetchRequest<Tag>(predicate: #Predicate { !$0.novels.isEmpty })) == 0)
    }

    nonisolated(unsafe) static var recorded: [String: String] = [:]   // the test above runs on the main actor only

    @Test("Prefetching gives the same answers as faulting, on both stores and in child contexts", arguments: StoreKind.allCases)
    func prefetchAnswers(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        try populate(container, count: 20)
        let context = container.viewContext
        var request = FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])
        request.relationshipKeyPathsForPrefetching = [\.author, \.tags, \.chapters]
        let plain = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])).map { "\($0.title) \($0.author?.name ?? "-") \($0.tags.map(\.name))" }
        context.reset()
        let prefetched = try context.fetch(request).map { "\($0.title) \($0.author?.name ?? "-") \($0.tags.map(\.name))" }
        #expect(prefetched == plain)
        let child = context.newChildContext()
        let fromChild = try await child.perform { context in
            try context.fetch(request).map { "\($0.title) \($0.author?.name ?? "-") \($0.tags.map(\.name))" }
        }
        #expect(fromChild == plain)
        var wrong = FetchRequest<Novel>()
        wrong.relationshipKeyPathsForPrefetching = [\.title]
        let error = try #require(throws: LoomError.self) { try context.fetch(wrong) }
        #expect(error.message.contains("does not name one of its relationships"))
    }

    @Test("A fault whose row was deleted elsewhere reads as deleted: no crash, no stale values", arguments: StoreKind.allCases)
    func inaccessibleFault(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let reader = container.newBackgroundContext(name: "reader")   // does not merge other saves
        let writer = container.newBackgroundContext(name: "writer")
        try await writer.perform { context in
            let ann = Author(name: "Ann", rating: 5)
            ann.born = Date(timeIntervalSince1970: 0)
            context.insert(Novel(title: "N", author: ann))
            try context.save()
        }
        let novelID = try await reader.perform { context in
            context.retainsRegisteredObjects = true
            let novel = try context.fetch(FetchRequest<Novel>()).first!
            _ = novel.title                       // loaded; its author is still a fault
            return novel.objectID
        }
        try await writer.perform { context in
            let author = try context.fetch(FetchRequest<Author>()).first!
            author.novels = []
            context.delete(author)
            try context.save()
        }
        let seen = try await reader.perform { context in
            let novel = try #require(context.registeredObject(for: novelID))   // loaded before the delete
            let author = try #require(novel.author)
            var events: [ObjectChanges] = []
            context.addObserver(for: .objectsDidChange) { if case .objectsDidChange(let c) = $0 { events.append(c) } }
            let view = "\(author.name)|\(author.rating)|\(author.born == nil)|\(author.novels.count)|\(author.isDeleted)|\(author.managedObjectContext == nil)"
            context.processPendingChanges()
            let error = try #require(throws: LoomError.self) { try context.fulfillFault(of: author) }
            #expect(error.code == .objectNotFound)
            #expect(error.message.contains("Author/1"))
            #expect(error.objectID == author.anyObjectID)
            #expect(events.last?.deleted.contains(author.anyObjectID) == true)
            return view
        }
        #expect(seen == "|0|true|0|true|true")
    }

    @Test("fulfillFault(of:) throws for a fault whose row is gone, before anything reads it", arguments: StoreKind.allCases)
    func fulfillFaultThrows(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let reader = container.newBackgroundContext(name: "reader")
        let writer = container.newBackgroundContext(name: "writer")
        let id = try await writer.perform { context in
            let tag = Tag(name: "t")
            context.insert(tag)
            try context.save()
            return tag.objectID
        }
        try await writer.perform { context in
            context.delete(try context.existingObject(with: id))
            try context.save()
        }
        let code = try await reader.perform { context in
            let tag = try context.object(with: id)    // a fault, no I/O
            do { try context.fulfillFault(of: tag); return "loaded" } catch { return "\((error as? LoomError)?.code.rawValue ?? "?")" }
        }
        #expect(code == "objectNotFound")
    }

    @Test("With deletesInaccessibleFaults off, touching such a fault traps with its ID", .ownThreads)
    func inaccessibleTraps() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let container = try StoreKind.inMemory.makeGraphContainer()
            let reader = container.newBackgroundContext(name: "reader")
            let writer = container.newBackgroundContext(name: "writer")
            let id = try await writer.perform { context in
                let tag = Tag(name: "t")
                context.insert(tag)
                try context.save()
                return tag.objectID
            }
            try await writer.perform { context in
                context.delete(try context.existingObject(with: id))
                try context.save()
            }
            try await reader.perform { context in
                context.deletesInaccessibleFaults = false
                _ = try context.object(with: id).name
            }
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Tag Tag/1 could not be loaded: its row no longer exists"))
    }
}
