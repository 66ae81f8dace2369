import Foundation
@testable import LoomCore
import Loom
import Observation
import Testing

/// Live queries: results kept current with exact sectioned changes, on every store kind.
@Suite("Live queries")
struct LiveQueryTests {
    /// Random choices a closure can carry to a context and back.
    struct Dice: Sendable {
        var state: UInt64
        var counter = 0

        init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }

        mutating func next(_ bound: Int) -> Int {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(bound))
        }

        mutating func unique() -> Int {
            counter += 1
            return counter
        }
    }

    /// One random edit of the graph in `context`: novels inserted, deleted, retitled, moved to
    /// another author, their pages or year changed; authors inserted, renamed, rerated, deleted
    /// (with their novels: cascade).
    static func edit(_ dice: inout Dice, _ context: ManagedObjectContext) throws {
        let novels = try context.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
        let authors = try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)]))
        func someAuthor() -> Author? { authors.isEmpty || dice.next(5) == 0 ? nil : authors[dice.next(authors.count)] }
        func year() -> Int? { dice.next(4) == 0 ? nil : 2000 + dice.next(3) }
        // The graph stays small (about 30 novels), so that changes often touch what a query shows.
        switch novels.count > 30 ? 2 : dice.next(12) {
        case 0, 1:
            let novel = Novel(title: "T\(dice.unique())", pages: dice.next(60), author: someAuthor())
            novel.year = year()
            context.insert(novel)
        case 2 where !novels.isEmpty: context.delete(novels[dice.next(novels.count)])
        case 3 where !novels.isEmpty: novels[dice.next(novels.count)].title = "T\(dice.unique())"
        case 4 where !novels.isEmpty: novels[dice.next(novels.count)].pages = dice.next(60)
        case 5 where !novels.isEmpty: novels[dice.next(novels.count)].year = year()
        case 6 where !novels.isEmpty: novels[dice.next(novels.count)].author = someAuthor()
        case 7: context.insert(Author(name: "A\(dice.unique())", rating: dice.next(4)))
        case 8 where !authors.isEmpty: authors[dice.next(authors.count)].name = "A\(dice.unique())"
        case 9 where !authors.isEmpty: authors[dice.next(authors.count)].rating = dice.next(4)
        case 10 where authors.count > 2 && dice.next(3) == 0: context.delete(authors[dice.next(authors.count)])
        default:
            if !novels.isEmpty { novels[dice.next(novels.count)].pages += 1 }
        }
    }

    /// A live query and what it was last seen to hold, checked against a fresh fetch.
    final class Check<Model: PersistentModel, Key: Hashable & Sendable>: @unchecked Sendable {
        let name: String
        let live: LiveQuery<Model, Key>
        /// The request as a fetch: the section key sorts first.
        let fetch: FetchRequest<Model>
        let key: (Model) -> Key
        var last: LiveResults<Model, Key>?
        var changesSeen = 0

        init(_ name: String, _ live: LiveQuery<Model, Key>, fetch: FetchRequest<Model>, key: @escaping (Model) -> Key) {
            self.name = name
            self.live = live
            self.fetch = fetch
            self.key = key
        }

        static func result(_ results: LiveResults<Model, Key>) -> SectionedResult<Key, ObjectID<Model>> {
            SectionedResult(results.sections.map { .init(key: $0.key, items: $0.items) })
        }

        /// Takes the query's next result, if any; checks that its change turns the last
        /// result into it, and that the result is what a fetch returns now.
        func verify(_ context: ManagedObjectContext, step: String) throws {
            if let results = try live.channel.poll() {
                if let last {
                    let changes = try #require(results.changes, "\(name), step \(step): a later result without changes")
                    let applied = SectionedDiff.apply(changes, to: Self.result(last), itemsFrom: Self.result(results))
                    try #require(applied == Self.result(results), "\(name), step \(step): the change does not turn the last result into the new one: \(changes)")
                    if !changes.isEmpty { changesSeen += 1 }
                } else {
                    try #require(results.changes == nil)
                }
                last = results
            }
            var expected: [LiveResults<Model, Key>.Section] = []
            var current: (key: Key, items: [ObjectID<Model>])?
            for object in try context.fetch(fetch) {
                let k = key(object)
                if current?.key == k {
                    current!.items.append(object.objectID)
                } else {
                    if let current { expected.append(.init(key: current.key, items: current.items)) }
                    current = (k, [object.objectID])
                }
            }
            if let current { expected.append(.init(key: current.key, items: current.items)) }
            if Key.self == NoSection.self && expected.isEmpty { expected = [.init(key: NoSection() as! Key, items: [])] }
            let seen = try #require(last).sections
            try #require(seen == expected, "\(name), step \(step): live \(seen.map { ($0.key, $0.items.map(\.erased.primaryKey)) }) ≠ fetched \(expected.map { ($0.key, $0.items.map(\.erased.primaryKey)) })")
        }
    }

    /// The queries under test: sections by an optional attribute, by a related object's name,
    /// a related predicate, a window, a to-many predicate and sections of authors.
    static func checks(_ context: ManagedObjectContext) throws -> [any Verifiable] {
        var byYear = FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])
        let q1 = Check("by year", try context.liveQuery(byYear, sectionedBy: \.year), fetch: { byYear.sortBy.insert(SortDescriptor(\.year), at: 0); return byYear }(), key: \.year)

        var byAuthor = FetchRequest<Novel>(predicate: #Predicate { $0.pages >= 20 }, sortBy: [SortDescriptor(\.pages, order: .reverse), SortDescriptor(\.title)])
        let q2 = Check("by author", try context.liveQuery(byAuthor, sectionedBy: \.author?.name), fetch: { byAuthor.sortBy.insert(SortDescriptor(\.author?.name), at: 0); return byAuthor }(),
                       // A queried path through a deleted author reaches no author, as it sorts:
                       // one deleted here, or elsewhere, that a novel still points to (merged in
                       // after the delete, or changed here before it). Reading the name fires the
                       // fault that finds the author gone.
                       key: { $0.author.flatMap { author in let name = author.name; return author.isDeleted ? nil : name } })

        let rated = FetchRequest<Novel>(predicate: #Predicate { $0.author != nil && $0.author?.rating ?? 0 >= 2 }, sortBy: [SortDescriptor(\.pages)])
        let q3 = Check("rated authors", try context.liveQuery(rated), fetch: rated, key: { _ in NoSection() })

        var window = FetchRequest<Novel>(sortBy: [SortDescriptor(\.pages), SortDescriptor(\.title)], fetchLimit: 5, fetchOffset: 2)
        let q4 = Check("window", try context.liveQuery(window, sectionedBy: \.year), fetch: { window.sortBy.insert(SortDescriptor(\.year), at: 0); return window }(), key: \.year)

        let long = FetchRequest<Author>(predicate: #Predicate { $0.novels.contains { $0.pages > 30 } }, sortBy: [SortDescriptor(\.name)])
        let q5 = Check("authors of long novels", try context.liveQuery(long), fetch: long, key: { _ in NoSection() })

        var byRating = FetchRequest<Author>(sortBy: [SortDescriptor(\.name, order: .reverse)])
        let q6 = Check("authors by rating", try context.liveQuery(byRating, sectionedBy: \.rating), fetch: { byRating.sortBy.insert(SortDescriptor(\.rating), at: 0); return byRating }(), key: \.rating)
        return [q1, q2, q3, q4, q5, q6]
    }

    @Test("Random local edits, sibling and child saves, own saves, rollbacks and cascades: every change turns the last result into the new one, which a fresh fetch equals",
          .serialized, arguments: [StoreKind.inMemory, .sqlite], [1, 2] as [UInt64])
    func differential(kind: StoreKind, seed: UInt64) throws {
        let container = try kind.makeGraphContainer()
        let observer = container.newBackgroundContext(name: "observer")
        let checks = try observer.performAndWait { context in
            context.automaticallyMergesChanges = true
            context.mergePolicy = .mergeByPropertyObjectTrump
            var dice = Dice(seed: 99)
            for _ in 0..<4 { context.insert(Author(name: "A\(dice.unique() + 10_000)", rating: dice.next(4))) }
            try context.save()
            return try Self.checks(context)
        }
        var dice = Dice(seed: seed)
        let steps = 2_500
        for step in 0..<steps {
            let roll = dice.next(20)
            if roll < 8 {
                dice = try observer.performAndWait { context in
                    var d = dice
                    for _ in 0...d.next(3) { try Self.edit(&d, context) }
                    context.processPendingChanges()
                    for check in checks { try check.verify(context, step: "\(step) (local edit)") }
                    return d
                }
                continue
            }
            if roll < 16 {
                // A sibling saves to the store, or a child to the observer.
                let editor = roll < 13 ? container.newBackgroundContext(name: "sibling") : observer.newChildContext(name: "child")
                dice = try editor.performAndWait { context in
                    var d = dice
                    for _ in 0...d.next(3) { try Self.edit(&d, context) }
                    try context.save()
                    return d
                }
            } else if roll < 19 {
                try observer.performAndWait { try $0.save() }
            } else {
                observer.performAndWait { $0.rollback() }
            }
            let what = roll < 13 ? "sibling save" : roll < 16 ? "child save" : roll < 19 ? "own save" : "rollback"
            try observer.performAndWait { context in
                context.mergePendingSaves()
                context.processPendingChanges()
                for check in checks { try check.verify(context, step: "\(step) (\(what))") }
            }
        }
        let changed = observer.performAndWait { _ in checks.map(\.changeCount) }
        // Every query saw changes, many of them.
        #expect(changed.allSatisfy { $0 > steps / 20 }, "changes seen per query: \(changed)")
    }
}

/// A live query check of any model and key type.
protocol Verifiable: Sendable {
    func verify(_ context: ManagedObjectContext, step: String) throws
    var changeCount: Int { get }
}

extension LiveQueryTests.Check: Verifiable {
    var changeCount: Int { changesSeen }
}

extension LiveQueryTests {
    @Test("An object moves between sections when its section key changes, saved or not", arguments: StoreKind.allCases)
    func sectionKeyChange(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        try container.newBackgroundContext().performAndWait { context in
            let live = try context.liveQuery(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]), sectionedBy: \.year)
            #expect(try live.channel.poll()?.sections.isEmpty == true)
            let novel = Novel(title: "A")
            novel.year = 2001
            context.insert(novel)
            context.processPendingChanges()
            let first = try #require(try live.channel.poll())
            #expect(first.sections.map(\.key) == [2001])
            novel.year = 2000
            context.processPendingChanges()
            let second = try #require(try live.channel.poll())
            #expect(second.sections.map(\.key) == [2000])
            #expect(second.changes?.deletedSections == [0])
            #expect(second.changes?.insertedSections == [0])
        }
    }
}

extension LiveQueryTests {
    @Test("Renaming an author, or giving a novel a new author in another context, moves the novel to that author's section", arguments: StoreKind.allCases)
    func relatedSectionKey(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let observer = container.newBackgroundContext(name: "observer")
        let (live, novelID) = try observer.performAndWait { context in
            context.automaticallyMergesChanges = true
            let novel = Novel(title: "N", pages: 30)
            context.insert(novel)
            context.insert(Novel(title: "M", pages: 40, author: Author(name: "Ann")))
            try context.save()
            let live = try context.liveQuery(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]), sectionedBy: \.author?.name)
            #expect(try live.channel.poll()?.sections.map(\.key) == [nil, "Ann"])
            return (live, novel.objectID)
        }
        try container.newBackgroundContext().performAndWait { context in
            try context.existingObject(with: novelID).author = Author(name: "Bea")
            try context.save()
        }
        try observer.performAndWait { context in
            context.mergePendingSaves()
            let results = try #require(try live.channel.poll())
            #expect(results.sections.map(\.key) == ["Ann", "Bea"])
            #expect(results.changes?.deletedSections == [0])
            #expect(results.changes?.insertedSections == [1])
        }
        try container.newBackgroundContext().performAndWait { context in
            let ann = try #require(try context.fetch(FetchRequest<Author>(predicate: #Predicate { $0.name == "Ann" })).first)
            ann.name = "Cy"
            try context.save()
        }
        try observer.performAndWait { context in
            context.mergePendingSaves()
            let results = try #require(try live.channel.poll())
            #expect(results.sections.map(\.key) == ["Bea", "Cy"])
            #expect(results.sections.map { $0.items.count } == [1, 1])
        }
    }
}

extension LiveQueryTests {
    @Test("A section key path that leads to no stored attribute is an error naming the entity, and nothing is registered")
    func badSectionKey() throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        container.newBackgroundContext().performAndWait { context in
            #expect(throws: LoomError.self) { try context.liveQuery(FetchRequest<Novel>(), sectionedBy: \.chapters.count) }
            #expect(context.liveQueries.isEmpty)
        }
    }

    @Test("The observable results change when IDs, order or an observed property change, not when an unobserved property changes", arguments: StoreKind.allCases)
    @MainActor
    func observerChangesOnlyWhenItShould(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let view = container.viewContext
        let novel = Novel(title: "b", pages: 1)
        view.insert(novel)
        view.insert(Novel(title: "c", pages: 2))
        try view.save()
        let observer = try LiveResultsObserver(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]), observing: [\Novel.title], in: view)
        #expect(observer.results.count == 2)
        let fired = Counter()
        func track() { withObservationTracking { _ = observer.results } onChange: { fired.add() } }

        track()
        novel.pages = 5          // not observed
        view.processPendingChanges()
        #expect(fired.value == 0)
        novel.title = "d"        // moves after c
        view.processPendingChanges()
        #expect(fired.value == 1)
        #expect(observer.results.changes?.movedItems.count == 1)

        track()
        let id = novel.objectID
        try await container.performBackgroundTask { context in
            try context.existingObject(with: id).pages = 9   // a merge of an unobserved change
            try context.save()
        }
        view.mergePendingSaves()
        #expect(fired.value == 1)
        try await container.performBackgroundTask { context in
            try context.existingObject(with: id).title = "e"   // observed, order unchanged
            try context.save()
        }
        view.mergePendingSaves()
        #expect(fired.value == 2)
        #expect(observer.results.changes?.updatedItems.map(\.properties) == [["title"]])
    }
}

/// Live query streams read from other tasks than their context's: coalescing, cancellation,
/// the context's end (run under ThreadSanitizer too).
@Suite("Live query streams", .timeLimit(.minutes(3)))
struct LiveQueryStreamTests {
    @Test("A reader that stops reading holds one result, however many changes come: the next element is the newest result, with one change from the last one read")
    func unreadResultsAreCoalesced() async throws {
        let container = try StoreKind.sqlite.makeGraphContainer()
        let context = container.newBackgroundContext()
        let (live, ids) = try context.performAndWait { context in
            let a = Novel(title: "a", pages: 1), b = Novel(title: "b", pages: 2)
            context.insert(a)
            context.insert(b)
            try context.save()
            return (try context.liveQuery(FetchRequest<Novel>(sortBy: [SortDescriptor(\.pages)])), [a.objectID, b.objectID])
        }
        var iterator = live.makeAsyncIterator()
        let first = try #require(try await iterator.next())
        #expect(first.items == ids)
        #expect(first.changes == nil)
        try context.performAndWait { context in
            let a = try context.existingObject(with: ids[0])
            for i in 0..<10_000 {
                a.pages = i % 2 == 0 ? 3 : 1   // a after b, then before it again…
                context.processPendingChanges()
                #expect(live.channel.heldResults <= 2)
            }
            a.pages = 3
            context.processPendingChanges()
        }
        let next = try #require(try await iterator.next())
        #expect(next.items == [ids[1], ids[0]])
        let changes = try #require(next.changes)
        #expect(changes.movedItems.count == 1)
        #expect(changes.updatedItems.map(\.properties) == [["pages"]])
    }

    @Test("Iterating ends when the reading task is cancelled, and when the context is gone")
    func iterationEnds() async throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        var context: BackgroundContext? = container.newBackgroundContext()
        let live = try context!.performAndWait { try $0.liveQuery(FetchRequest<Novel>()) }
        let reader = Task {
            var count = 0
            for try await _ in live { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(50))
        reader.cancel()
        #expect(try await reader.value == 1)

        let second = try context!.performAndWait { try $0.liveQuery(FetchRequest<Novel>()) }
        let ended = Task {
            var count = 0
            for try await _ in second { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(50))
        context = nil
        #expect(try await ended.value == 1)
    }
}

/// Counts calls from any thread.
final class Counter: Sendable {
    private let count = Locked(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

extension LiveQueryStreamTests {
    @Test("Another container's commits (another coordinator, as another process) reach a live query on the view context: a renamed author moves their novels", .timeLimit(.minutes(3)))
    @MainActor
    func remoteCommits() async throws {
        let url = TemporaryDirectory.make().appending(path: "graph.loom")
        let schema = try Schema(StoreKind.graphTypes)
        let here = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        let there = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        let view = here.viewContext
        let ann = Author(name: "Ann")
        view.insert(Novel(title: "N", pages: 10, author: ann))
        try view.save()
        let authorID = ann.objectID
        var results = try view.liveQuery(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]), sectionedBy: \.author?.name).makeAsyncIterator()
        #expect(try await results.next(isolation: #isolation)?.sections.map(\.key) == ["Ann"])
        try await there.performBackgroundTask { context in
            try context.existingObject(with: authorID).name = "Bea"
            context.insert(Novel(title: "M", pages: 20))
            try context.save()
        }
        // Merged when the watcher sees the commit; the live query delivers after the merge.
        let next = try #require(try await results.next(isolation: #isolation))
        #expect(next.sections.map(\.key) == [nil, "Bea"])
        #expect(next.changes?.deletedSections == [0])
        #expect(next.changes?.insertedSections == [0, 1])
        try await here.close()
        try await there.close()
    }
}

extension LiveQueryStreamTests {
    @Test("A live query that cannot be evaluated again (its store closed) ends its stream with the store's error, and an observer keeps it, instead of trapping or going quiet", .timeLimit(.minutes(3)))
    func storeFailureEndsTheStream() async throws {
        let container = try StoreKind.sqlite.makeGraphContainer()
        let context = container.newBackgroundContext()
        let (live, observer, ids) = try context.performAndWait { context in
            let novels = (0..<3).map { Novel(title: "N\($0)", pages: $0) }
            for novel in novels { context.insert(novel) }
            try context.save()
            let ids = novels.map(\.objectID)
            context.reset()   // nothing loaded: judging a changed novel reads the store
            let request = FetchRequest<Novel>(sortBy: [SortDescriptor(\.pages)])
            let observer = UncheckedObserver(try LiveResultsObserver(request, in: context))
            return (try context.liveQuery(request), observer, ids)
        }
        var iterator = live.makeAsyncIterator()
        #expect(try await iterator.next()?.count == 3)
        try await container.close()
        context.performAndWait { context in
            var changes = ObjectChanges()
            changes.updated = [ids[0].erased]
            changes.changedProperties = [ids[0].erased: ["pages"]]
            context.mergeChanges(fromContextDidSave: changes)
        }
        await #expect(throws: LoomError.self) { _ = try await iterator.next() }
        let error = context.performAndWait { _ in observer.observer.error }
        #expect(error != nil)
        #expect(context.performAndWait { _ in observer.observer.results.count } == 3)   // the last result stays
    }
}

/// Carries an observer made on a context's queue back to the test, which reads it only there.
struct UncheckedObserver: @unchecked Sendable {
    let observer: LiveResultsObserver<Novel, NoSection>
    init(_ observer: LiveResultsObserver<Novel, NoSection>) { self.observer = observer }
}
