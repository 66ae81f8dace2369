import Foundation
import Loom
import Testing

/// Predicates that cross relationships give the same answers on every store and with unsaved
/// changes.
@MainActor
@Suite("Graph queries", .timeLimit(.minutes(5)))
struct GraphQueryTests {
    struct Library {
        let ann: Author, bob: Author, cy: Author
        let dune: Novel, emma: Novel, fog: Novel, gulf: Novel
        let fantasy: Tag, classic: Tag, unused: Tag
    }

    /// Ann (Pan, rating 5) wrote Dune (412 pages; fantasy, classic) and Emma (180; classic);
    /// Bob (rating 2) wrote Fog (90); Cy wrote nothing; Gulf (250) has no author.
    func library(_ context: ManagedObjectContext) throws -> Library {
        let pan = Publisher(name: "Pan")
        let ann = Author(name: "Ann", rating: 5), bob = Author(name: "Bob", rating: 2), cy = Author(name: "Cy", rating: 4)
        let dune = Novel(title: "Dune", pages: 412, author: ann), emma = Novel(title: "Emma", pages: 180, author: ann)
        let fog = Novel(title: "Fog", pages: 90, author: bob), gulf = Novel(title: "Gulf", pages: 250)
        let fantasy = Tag(name: "fantasy"), classic = Tag(name: "classic"), unused = Tag(name: "unused")
        context.insert(pan)
        for object in [ann, bob, cy] { context.insert(object) }
        for object in [dune, emma, fog, gulf] { context.insert(object) }
        for object in [fantasy, classic, unused] { context.insert(object) }
        ann.publisher = pan
        bob.mentor = ann
        dune.tags = [fantasy, classic]
        emma.tags = [classic]
        try context.save()
        return Library(ann: ann, bob: bob, cy: cy, dune: dune, emma: emma, fog: fog, gulf: gulf, fantasy: fantasy, classic: classic, unused: unused)
    }

    func titles(_ context: ManagedObjectContext, _ predicate: Predicate<Novel>) throws -> [String] {
        try context.fetch(FetchRequest(predicate: predicate, sortBy: [SortDescriptor(\.title)])).map(\.title)
    }

    func names(_ context: ManagedObjectContext, _ predicate: Predicate<Author>) throws -> [String] {
        try context.fetch(FetchRequest(predicate: predicate, sortBy: [SortDescriptor(\.name)])).map(\.name)
    }

    @Test("Through to-one relationships: optional chaining, nil, two hops, forced unwrap", arguments: StoreKind.allCases)
    func toOne(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        _ = try library(context)
        #expect(try titles(context, #Predicate { $0.author?.name == "Ann" }) == ["Dune", "Emma"])
        #expect(try titles(context, #Predicate { $0.author == nil }) == ["Gulf"])
        #expect(try titles(context, #Predicate { $0.author != nil && $0.author?.rating ?? 0 < 3 }) == ["Fog"])
        #expect(try titles(context, #Predicate { $0.author?.publisher?.name == "Pan" }) == ["Dune", "Emma"])
        #expect(try titles(context, #Predicate { $0.author?.mentor?.name == "Ann" }) == ["Fog"])
        #expect(try titles(context, #Predicate { $0.author!.rating > 3 }) == ["Dune", "Emma"])
        #expect(try titles(context, #Predicate { $0.author?.name.starts(with: "B") == true }) == ["Fog"])
        #expect(try names(context, #Predicate { $0.publisher == nil }) == ["Bob", "Cy"])
    }

    @Test("Through to-many relationships: contains(where:), allSatisfy, isEmpty, count", arguments: StoreKind.allCases)
    func toMany(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        _ = try library(context)
        #expect(try names(context, #Predicate { $0.novels.contains { $0.pages > 300 } }) == ["Ann"])
        #expect(try names(context, #Predicate { $0.novels.allSatisfy { $0.pages > 100 } }) == ["Ann", "Cy"])   // empty: true
        #expect(try names(context, #Predicate { $0.novels.isEmpty }) == ["Cy"])
        #expect(try names(context, #Predicate { !$0.novels.isEmpty }) == ["Ann", "Bob"])
        #expect(try names(context, #Predicate { $0.novels.count >= 2 }) == ["Ann"])
        #expect(try names(context, #Predicate { $0.students.count == 1 }) == ["Ann"])
        #expect(try names(context, #Predicate { $0.novels.contains { $0.tags.contains { $0.name == "fantasy" } } }) == ["Ann"])
        // Many-to-many, both ways.
        #expect(try titles(context, #Predicate { $0.tags.contains { $0.name == "classic" } }) == ["Dune", "Emma"])
        #expect(try titles(context, #Predicate { $0.tags.isEmpty }) == ["Fog", "Gulf"])
        let unusedTags = try context.fetch(FetchRequest<Tag>(predicate: #Predicate { $0.novels.count == 0 })).map(\.name)
        #expect(unusedTags == ["unused"])
        // Mixed: a to-one, then a to-many.
        #expect(try titles(context, #Predicate { ($0.author?.novels.count ?? 0) > 1 }) == ["Dune", "Emma"])
        #expect(try titles(context, #Predicate { $0.author?.students.contains { $0.name == "Bob" } == true }) == ["Dune", "Emma"])
    }

    @Test("Matching by object ID: the object's, a to-one's, a to-many member's", arguments: StoreKind.allCases)
    func byID(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let lib = try library(context)
        let annID = lib.ann.objectID, duneID = lib.dune.objectID
        #expect(try titles(context, #Predicate { $0.author?.objectID == annID }) == ["Dune", "Emma"])
        #expect(try titles(context, #Predicate { $0.objectID == duneID }) == ["Dune"])
        #expect(try names(context, #Predicate { $0.novels.contains { $0.objectID == duneID } }) == ["Ann"])
        let ids = [lib.fog.objectID, lib.gulf.objectID]
        #expect(try titles(context, #Predicate { ids.contains($0.objectID) }) == ["Fog", "Gulf"])
    }

    @Test("Unsaved changes anywhere along the path change the answer at once", arguments: StoreKind.allCases)
    func pendingChanges(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let lib = try library(context)
        lib.bob.name = "Bo"                          // a related object's attribute
        #expect(try titles(context, #Predicate { $0.author?.name == "Bo" }) == ["Fog"])
        lib.gulf.author = lib.cy                     // a to-one
        #expect(try names(context, #Predicate { $0.novels.isEmpty }) == [])
        let hut = Novel(title: "Hut", pages: 999)    // an inserted object
        hut.author = lib.bob
        #expect(try names(context, #Predicate { $0.novels.contains { $0.pages > 900 } }) == ["Bo"])
        #expect(try titles(context, #Predicate { $0.author?.name == "Bo" }) == ["Fog", "Hut"])
        lib.unused.novels = [lib.fog]                // a many-to-many
        #expect(try titles(context, #Predicate { $0.tags.contains { $0.name == "unused" } }) == ["Fog"])
        context.delete(lib.dune)                     // a deletion, before and after the rules run
        context.processPendingChanges()
        #expect(try titles(context, #Predicate { $0.tags.contains { $0.name == "fantasy" } }) == [])
        let fantasyCount = try context.count(for: FetchRequest<Tag>(predicate: #Predicate { $0.novels.isEmpty }))
        #expect(fantasyCount == 1)
        // The same answers once saved, from a context without changes.
        try context.save()
        let other = container.newBackgroundContext()
        let saved = try other.performAndWait { context in
            try context.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.author?.name == "Bo" }, sortBy: [SortDescriptor(\.title)])).map(\.title)
        }
        #expect(saved == ["Fog", "Hut"])
    }

    @Test("A child context sees its parent's unsaved graph changes in its queries", arguments: StoreKind.allCases)
    func childContext(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let lib = try library(context)
        lib.fog.tags = [lib.fantasy]
        let child = context.newChildContext()
        let seen = try await child.perform { context in
            try context.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.tags.contains { $0.name == "fantasy" } }, sortBy: [SortDescriptor(\.title)])).map(\.title)
        }
        #expect(seen == ["Dune", "Fog"])
    }

    @Test("Graph predicates Loom cannot translate are errors naming the construct", arguments: StoreKind.allCases)
    func unsupported(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let outer = #Predicate<Author> { author in author.novels.contains { $0.pages > author.rating } }
        let error = try #require(throws: LoomError.self) { try context.fetch(FetchRequest(predicate: outer)) }
        #expect(error.code == .unsupportedPredicate)
        #expect(error.message.contains("enclosing scope"))
    }

    @Test("Sorting by to-one key paths: one hop, two hops, required, with unsaved changes", arguments: StoreKind.allCases)
    func sortThroughToOne(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let lib = try library(context)
        func order(_ sort: [SortDescriptor<Novel>]) throws -> [String] {
            try context.fetch(FetchRequest<Novel>(sortBy: sort)).map(\.title)
        }
        // No author sorts first (NULL), ties by the next descriptor.
        #expect(try order([SortDescriptor(\.author?.name), SortDescriptor(\.title)]) == ["Gulf", "Dune", "Emma", "Fog"])
        #expect(try order([SortDescriptor(\.author?.rating, order: .reverse), SortDescriptor(\.title, order: .reverse)]) == ["Emma", "Dune", "Fog", "Gulf"])
        #expect(try order([SortDescriptor(\.author?.publisher?.name), SortDescriptor(\.title)]) == ["Fog", "Gulf", "Dune", "Emma"])
        // Unsaved: Bob renamed before Ann; a new novel by him.
        lib.bob.name = "Aaron"
        context.insert(Novel(title: "Hut", author: lib.bob))
        #expect(try order([SortDescriptor(\.author?.name), SortDescriptor(\.title)]) == ["Gulf", "Fog", "Hut", "Dune", "Emma"])
        var limited = FetchRequest<Novel>(sortBy: [SortDescriptor(\.author?.name), SortDescriptor(\.title)])
        limited.fetchLimit = 2
        limited.fetchOffset = 1
        #expect(try context.fetch(limited).map(\.title) == ["Fog", "Hut"])
        try context.save()
        // A required to-one.
        context.insert(Review(text: "r1", novel: lib.fog))
        context.insert(Review(text: "r2", novel: lib.dune))
        try context.save()
        let reviews = try context.fetch(FetchRequest<Review>(sortBy: [SortDescriptor(\.novel.title)])).map(\.text)
        #expect(reviews == ["r2", "r1"])
        // Not an attribute at the end of the path: a clear error.
        let error = try #require(throws: LoomError.self) { try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.author?.name.count)])) }
        #expect(error.code == .unsupportedSort)
    }

    @Test("The SQL of a graph query")
    func recordedSQL() throws {
        let log = StatementLog()
        let container = try StoreKind.sqlite.makeGraphContainer(trace: log.hook)
        let context = container.viewContext
        _ = try library(context)
        log.reset()
        #expect(try names(context, #Predicate { $0.novels.contains { $0.author?.publisher?.name == "Pan" && $0.pages > 300 } && $0.novels.count < 5 }) == ["Ann"])
        let sql = try #require(log.selects.first)
        print("SQL graph query: \(sql)")
        #expect(sql.contains("EXISTS (SELECT 1 FROM \"Novel\""))
        log.reset()
        _ = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.author?.name)]))
        print("SQL sort through a to-one: \(log.selects.first ?? "-")")
    }
}
