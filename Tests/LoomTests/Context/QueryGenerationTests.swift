import Foundation
import GRDB
import Loom
@_spi(LoomTesting) import LoomCore
import Synchronization
import Testing

/// Query generations: a context pinned to the store's data at one moment
/// (`setQueryGenerationFrom(_:)`), on every store kind.
@Suite("Query generations", .timeLimit(.minutes(5)))
struct QueryGenerationTests {
    /// A container with `count` novels "N0"… of 10·i pages, each by its own author, and a
    /// context on its own queue that merges nothing by itself.
    func library(_ kind: StoreKind, count: Int = 10) throws -> (PersistentContainer, BackgroundContext) {
        let container = try kind.makeGraphContainer()
        try container.newBackgroundContext().performAndWait { context in
            for i in 0..<count { context.insert(Novel(title: "N\(i)", pages: 10 * i, author: Author(name: "A\(i)"))) }
            try context.save()
        }
        let reader = container.newBackgroundContext(name: "pinned reader")
        reader.performAndWait { $0.automaticallyMergesChanges = false }
        return (container, reader)
    }

    /// What another context commits: N0 renamed and longer, N1 deleted, N2 moved to A0, a new
    /// novel by A0.
    func change(_ container: PersistentContainer) throws {
        try container.newBackgroundContext(name: "writer").performAndWait { context in
            let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
            let a0 = try #require(novels[0].author)
            novels[0].title = "N0 changed"
            novels[0].pages = 1_000
            context.delete(novels[1])
            novels[2].author = a0
            context.insert(Novel(title: "new", pages: 5, author: a0))
            try context.save()
        }
    }

    /// What a context reads: titles in order, the count, the sum of pages, A0's novels.
    static func view(_ context: ManagedObjectContext) throws -> [String] {
        let titles = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])).map(\.title)
        let count = try context.count(for: FetchRequest<Novel>())
        let pages = try context.fetch(PropertyFetchRequest<Novel>(properties: [.sum(\.pages, as: "pages")]))[0]["pages", as: Int.self]
        let a0 = try #require(try context.fetch(FetchRequest<Author>(predicate: #Predicate { $0.name == "A0" })).first)
        let works = a0.novels.map(\.title).sorted()
        return titles + ["count \(count)", "pages \(pages)", "A0: \(works.joined(separator: ","))"]
    }

    @Test("A pinned context keeps old values, membership, counts, aggregates and deleted objects while another saves; set again, it sees the new ones", arguments: StoreKind.allCases)
    func pinnedKeepsItsMoment(kind: StoreKind) throws {
        let (container, reader) = try library(kind)
        let (before, n1, token) = try reader.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            let n1 = try #require(try context.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.title == "N1" })).first).objectID
            context.reset()   // nothing registered: every later read goes to the generation
            return (try Self.view(context), n1, try #require(context.queryGenerationToken))
        }
        #expect(before.last == "A0: N0")
        try change(container)
        try reader.performAndWait { context in
            #expect(context.queryGenerationToken == token)
            // Everything read now comes from the moment pinned (the reset moved it past nothing).
            #expect(try Self.view(context) == before)
            // The deleted novel is still readable, through a fault and by ID.
            #expect(try context.existingObject(with: n1).title == "N1")
            try context.setQueryGenerationFrom(.current)
            #expect(context.queryGenerationToken != token)
            context.reset()
            #expect(try Self.view(context) == ["N0 changed", "N2", "N3", "N4", "N5", "N6", "N7", "N8", "N9", "new", "count 10", "pages 1445", "A0: N0 changed,N2,new"])
            #expect(throws: LoomError.self) { try context.existingObject(with: n1) }
        }
    }

    @Test("Objects registered before the generation moves keep their values until refreshed, as in Core Data", arguments: StoreKind.allCases)
    func movingDoesNotRefresh(kind: StoreKind) throws {
        let (container, reader) = try library(kind)
        let n0 = try reader.performAndWait { context in
            context.retainsRegisteredObjects = true
            try context.setQueryGenerationFrom(.current)
            let n0 = try #require(try context.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.title == "N0" })).first)
            _ = n0.pages
            return n0.objectID
        }
        try change(container)
        try reader.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            // existingObject(with:) would bring it up to date; registeredObject(for:) does not.
            let object = try #require(context.registeredObject(for: n0.erased) as? Novel)
            #expect(object.title == "N0")
            try context.refreshAllObjects()
            #expect(object.title == "N0 changed")
        }
    }

    @Test("refreshAllObjects() after the generation moves past a deletion completes: the deleted object, loaded or a fault, reads as deleted; pinned, it stays readable",
          arguments: StoreKind.allCases, [true, false])
    func refreshAllAfterMovingPastDeletion(kind: StoreKind, deletedWasLoaded: Bool) throws {
        let (container, reader) = try library(kind)
        let (n0, n1) = try reader.performAndWait { context in
            context.retainsRegisteredObjects = true
            try context.setQueryGenerationFrom(.current)
            let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
            for novel in novels where novel.title != "N1" || deletedWasLoaded { _ = novel.pages }
            return (novels[0].objectID, novels[1].objectID)
        }
        try change(container)   // N0 renamed, N1 deleted
        try reader.performAndWait { context in
            let first = try #require(context.registeredObject(for: n0.erased) as? Novel)
            let deleted = try #require(context.registeredObject(for: n1.erased) as? Novel)
            // Pinned, the deleted novel is still there.
            try context.refreshAllObjects()
            #expect(first.title == "N0")
            #expect(deleted.title == "N1" && !deleted.isDeleted)
            try context.setQueryGenerationFrom(.current)
            try context.refreshAllObjects()
            #expect(first.title == "N0 changed")
            #expect(deleted.isFault)
            #expect(deleted.title == "")
            #expect(deleted.isDeleted)
            #expect(try context.count(for: FetchRequest<Novel>()) == 10)
        }
    }

    @Test("The generation moves on the context's own save, on a merge and on reset", arguments: StoreKind.allCases)
    func advanceTriggers(kind: StoreKind) throws {
        let (container, reader) = try library(kind)
        func pinnedCount(_ context: ManagedObjectContext) throws -> Int { try context.count(for: FetchRequest<Novel>()) }
        // Own save.
        try reader.performAndWait { try $0.setQueryGenerationFrom(.current) }
        try change(container)   // 10 novels: one deleted, one inserted
        try container.newBackgroundContext().performAndWait { context in
            context.insert(Novel(title: "eleventh", author: Author(name: "E")))
            try context.save()
        }
        try reader.performAndWait { context in
            #expect(try pinnedCount(context) == 10)
            let before = context.queryGenerationToken
            context.insert(Novel(title: "by the reader", author: Author(name: "R")))
            try context.save()
            #expect(context.queryGenerationToken != before && context.queryGenerationToken != nil)
            #expect(try pinnedCount(context) == 12)
        }
        // Merge.
        try container.newBackgroundContext().performAndWait { context in
            context.insert(Novel(title: "thirteenth", author: Author(name: "T")))
            try context.save()
        }
        reader.performAndWait { context in
            #expect((try? pinnedCount(context)) == 12)
            context.automaticallyMergesChanges = true
        }
        try container.newBackgroundContext().performAndWait { context in
            context.insert(Novel(title: "fourteenth", author: Author(name: "F")))
            try context.save()
        }
        reader.performAndWait { context in
            context.mergePendingSaves()
            #expect((try? pinnedCount(context)) == 14)
            context.automaticallyMergesChanges = false
        }
        // Reset.
        try container.newBackgroundContext().performAndWait { context in
            context.insert(Novel(title: "fifteenth", author: Author(name: "Q")))
            try context.save()
        }
        try reader.performAndWait { context in
            #expect(try pinnedCount(context) == 14)
            context.reset()
            #expect(try pinnedCount(context) == 15)
            // Unpinned: the latest data at every read.
            try context.setQueryGenerationFrom(nil)
            #expect(context.queryGenerationToken == nil)
        }
        try container.newBackgroundContext().performAndWait { context in
            context.insert(Novel(title: "sixteenth", author: Author(name: "S")))
            try context.save()
        }
        #expect(try reader.performAndWait { try pinnedCount($0) } == 16)
    }

    @Test("A token shared with another context pins it to the same moment", arguments: StoreKind.allCases)
    func sharedToken(kind: StoreKind) throws {
        let (container, reader) = try library(kind)
        let token = try reader.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            return try #require(context.queryGenerationToken)
        }
        try change(container)
        let other = container.newBackgroundContext(name: "second reader")
        try other.performAndWait { context in
            context.automaticallyMergesChanges = false
            try context.setQueryGenerationFrom(token)
            #expect(context.queryGenerationToken == token)
            #expect(try context.count(for: FetchRequest<Novel>(predicate: #Predicate { $0.title == "N1" })) == 1)
        }
        #expect(try reader.performAndWait { try $0.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])).first?.title } == "N0")
    }

    @Test("A child context, another store's token and a released generation are refused with queryGenerationUnavailable")
    func refused() throws {
        let (container, reader) = try library(.sqlite)
        let child = reader.performAndWait { $0.newChildContext(name: "child") }
        let error = try #require(throws: LoomError.self) { try child.performAndWait { try $0.setQueryGenerationFrom(.current) } }
        #expect(error.code == .queryGenerationUnavailable)
        #expect(error.message.contains("child"))

        let (_, stranger) = try library(.sqlite)
        let foreign = try stranger.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            return try #require(context.queryGenerationToken)
        }
        let wrongStore = try #require(throws: LoomError.self) { try reader.performAndWait { try $0.setQueryGenerationFrom(foreign) } }
        #expect(wrongStore.code == .queryGenerationUnavailable)

        container.coordinator.queryGenerationLimit = QueryGenerationLimit(maximumAge: .milliseconds(50))
        let old = try reader.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            return try #require(context.queryGenerationToken)
        }
        Thread.sleep(forTimeInterval: 0.4)
        let released = try #require(throws: LoomError.self) { try container.newBackgroundContext().performAndWait { try $0.setQueryGenerationFrom(old) } }
        #expect(released.code == .queryGenerationUnavailable)
        #expect(released.message.contains("released"))
    }

    @Test("A generation that cannot move (the store closed) unpins the context and keeps the error in pendingStoreError")
    func advanceFailureIsReported() async throws {
        let (container, reader) = try library(.sqlite)
        try reader.performAndWait { try $0.setQueryGenerationFrom(.current) }
        try await container.close()
        let (token, pending) = reader.performAndWait { context in
            context.reset()   // moves the generation: no snapshot can be taken any more
            return (context.queryGenerationToken, context.pendingStoreError)
        }
        #expect(token == nil)
        #expect(pending?.code == .closed)
    }

    @Test("A generation older than the limit is released: the context moves to the current data and posts queryGenerationReleased", arguments: StoreKind.allCases)
    func releasedByAge(kind: StoreKind) throws {
        let (container, reader) = try library(kind)
        container.coordinator.queryGenerationLimit = QueryGenerationLimit(maximumAge: .milliseconds(100))
        let events = Mutex<[ContextEvent]>([])
        let token = try reader.performAndWait { context in
            context.addObserver(for: .queryGenerationReleased) { event in events.withLock { $0.append(event) } }
            try context.setQueryGenerationFrom(.current)
            return try #require(context.queryGenerationToken)
        }
        try change(container)
        Thread.sleep(forTimeInterval: 0.5)
        let (found, now) = try reader.performAndWait { context in
            (try context.count(for: FetchRequest<Novel>(predicate: #Predicate { $0.title == "new" })), context.queryGenerationToken)
        }
        #expect(found == 1)
        #expect(now != token && now != nil)
        #expect(events.withLock { $0 } == [.queryGenerationReleased(token)])
    }

    @Test("On SQLite a generation whose WAL grows past the limit is released, and the WAL can then be checkpointed whole")
    func releasedByWALSize() throws {
        let (container, reader) = try library(.sqlite)
        container.coordinator.queryGenerationLimit = QueryGenerationLimit(maximumRetainedBytes: 256 * 1024)
        let token = try reader.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            return try #require(context.queryGenerationToken)
        }
        let writer = container.newBackgroundContext(name: "writer")
        for batch in 0..<20 {
            try writer.performAndWait { context in
                for i in 0..<200 { context.insert(Novel(title: "batch \(batch) #\(i) " + String(repeating: "x", count: 200), author: Author(name: "W\(batch)-\(i)"))) }
                try context.save()
            }
        }
        let deadline = Date().addingTimeInterval(5)
        while !token.description.contains("released") && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(token.description.contains("released"), "the pinned generation was not released after the WAL passed 256 KiB")
        #expect(try reader.performAndWait { try $0.count(for: FetchRequest<Novel>()) } == 10 + 4_000)
        // Nothing reads the old moment any more: every frame of the WAL can go into the file
        // (the context's new generation reads the latest commit, which holds nothing back).
        let path = try #require((container.coordinator.store as? SQLiteStore)?.url.path)
        let queue = try DatabaseQueue(path: path)
        let result = try queue.inDatabase { db in try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)") }
        try queue.close()
        let row = try #require(result)
        #expect(row[1] as Int > 0 && row[1] as Int == row[2] as Int, "WAL frames \(row[1] as Int), checkpointed \(row[2] as Int)")
    }

    @Test("Differential: a pinned context answers as at its moment while 200 saves insert, delete, change and move novels", arguments: StoreKind.allCases)
    func differential(kind: StoreKind) throws {
        let (container, reader) = try library(kind, count: 40)
        let expected = try reader.performAndWait { context in
            try context.setQueryGenerationFrom(.current)
            return try Self.view(context)
        }
        let writer = container.newBackgroundContext(name: "writer")
        var generator = SeededGenerator(seed: 12)
        for round in 0..<200 {
            try writer.performAndWait { context in
                let novels = try context.fetch(FetchRequest<Novel>())
                let authors = try context.fetch(FetchRequest<Author>())
                switch generator.next() % 4 {
                case 0: context.insert(Novel(title: "R\(round)", pages: round, author: authors[Int(generator.next() % UInt64(authors.count))]))
                case 1: if let victim = novels.randomElement(using: &generator) { context.delete(victim) }
                case 2: novels.randomElement(using: &generator)?.pages += 1
                default: novels.randomElement(using: &generator)?.author = authors[Int(generator.next() % UInt64(authors.count))]
                }
                try context.save()
            }
            if round % 20 == 19 {
                #expect(try reader.performAndWait { try Self.view($0) } == expected, "after \(round + 1) saves")
            }
        }
    }
}

