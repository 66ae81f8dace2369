import Foundation
@_spi(LoomTesting) @testable import LoomCore
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

    /// A live query, an observer of the same request, and what they were last seen to hold,
    /// checked against a fresh fetch.
    final class Check<Model: PersistentModel, Key: Hashable & Sendable>: @unchecked Sendable {
        let name: String
        let live: LiveQuery<Model, Key>
        let observer: LiveResultsObserver<Model, Key>
        /// The request as a fetch: the section key sorts first.
        let fetch: FetchRequest<Model>
        let key: (Model) -> Key
        /// What an object shows of itself: when it changes, the object was updated.
        let fingerprint: (Model) -> String
        var last: LiveResults<Model, Key>?
        /// The fingerprints of the objects in the last result.
        var shown: [ObjectID<Model>: String] = [:]
        var changesSeen = 0

        init(_ name: String, _ live: LiveQuery<Model, Key>, _ observer: LiveResultsObserver<Model, Key>, fetch: FetchRequest<Model>,
             key: @escaping (Model) -> Key, fingerprint: @escaping (Model) -> String) {
            self.name = name
            self.live = live
            self.observer = observer
            self.fetch = fetch
            self.key = key
            self.fingerprint = fingerprint
        }

        static func result(_ results: LiveResults<Model, Key>) -> SectionedResult<Key, ObjectID<Model>> {
            SectionedResult(results.sections.map { .init(key: $0.key, items: $0.items) })
        }

        /// Takes the query's next result, if any; checks that its change is not empty and turns
        /// the last result into it, that the result is what a fetch returns now, and that an
        /// element came when an object shown before and now changed. Checks that the
        /// observer's result is the fetch's too, and its change not empty (it is updated at each
        /// event, so its change may be the last of several in a step).
        func verify(_ context: ManagedObjectContext, step: String) throws {
            let delivered = try live.channel.poll()
            if let results = delivered {
                if let last {
                    let changes = try #require(results.changes, "\(name), step \(step): a later result without changes")
                    try #require(!changes.isEmpty, "\(name), step \(step): an element whose change is empty")
                    let applied = SectionedDiff.apply(changes, to: Self.result(last), itemsFrom: Self.result(results))
                    try #require(applied == Self.result(results), "\(name), step \(step): the change does not turn the last result into the new one: \(changes)")
                    changesSeen += 1
                } else {
                    try #require(results.changes == nil)
                }
                last = results
            }
            var expected: [LiveResults<Model, Key>.Section] = []
            var current: (key: Key, items: [ObjectID<Model>])?
            var now: [ObjectID<Model>: String] = [:]
            for object in try context.fetch(fetch) {
                now[object.objectID] = fingerprint(object)
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
            let observed = observer.results
            try #require(observed.changes.map { !$0.isEmpty } ?? true, "\(name), step \(step): the observer's change is empty")
            try #require(observed.sections == expected, "\(name), step \(step): the observer's result is not what a fetch returns")
            // Objects shown before and now whose properties changed: an element must come.
            let updated = now.keys.filter { id in shown[id].map { $0 != now[id] } ?? false }
            if !updated.isEmpty {
                try #require(delivered != nil, "\(name), step \(step): objects in the result changed, and no element came: \(updated.map { "\($0): \(shown[$0]!) -> \(now[$0]!)" })")
            }
            shown = now
        }
    }

    /// The queries under test: sections by an optional attribute, by a related object's name,
    /// a related predicate, windows with and without sections, a to-many predicate, sections of
    /// authors, and a query without a sort.
    static func checks(_ context: ManagedObjectContext) throws -> [any Verifiable] {
        // Attributes only: a novel's author can read as none without the novel changing (one
        // deleted elsewhere that it still points to), which the "by author" sections check.
        func novel(_ novel: Novel) -> String { "\(novel.title) \(novel.pages) \(novel.year ?? -1)" }
        func author(_ author: Author) -> String { "\(author.name) \(author.rating)" }

        var byYear = FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])
        let q1 = Check("by year", try context.liveQuery(byYear, sectionedBy: \.year), try LiveResultsObserver(byYear, sectionedBy: \.year, in: context),
                       fetch: { byYear.sortBy.insert(SortDescriptor(\.year), at: 0); return byYear }(), key: \.year, fingerprint: novel)

        var byAuthor = FetchRequest<Novel>(predicate: #Predicate { $0.pages >= 20 }, sortBy: [SortDescriptor(\.pages, order: .reverse), SortDescriptor(\.title)])
        let q2 = Check("by author", try context.liveQuery(byAuthor, sectionedBy: \.author?.name), try LiveResultsObserver(byAuthor, sectionedBy: \.author?.name, in: context),
                       fetch: { byAuthor.sortBy.insert(SortDescriptor(\.author?.name), at: 0); return byAuthor }(),
                       // A queried path through a deleted author reaches no author, as it sorts:
                       // one deleted here, or elsewhere, that a novel still points to (merged in
                       // after the delete, or changed here before it). Reading the name fires the
                       // fault that finds the author gone.
                       key: { $0.author.flatMap { author in let name = author.name; return author.isDeleted ? nil : name } }, fingerprint: novel)

        let rated = FetchRequest<Novel>(predicate: #Predicate { $0.author != nil && $0.author?.rating ?? 0 >= 2 }, sortBy: [SortDescriptor(\.pages)])
        let q3 = Check("rated authors", try context.liveQuery(rated), try LiveResultsObserver(rated, in: context), fetch: rated, key: { _ in NoSection() }, fingerprint: novel)

        var window = FetchRequest<Novel>(sortBy: [SortDescriptor(\.pages), SortDescriptor(\.title)], fetchLimit: 5, fetchOffset: 2)
        let q4 = Check("window", try context.liveQuery(window, sectionedBy: \.year), try LiveResultsObserver(window, sectionedBy: \.year, in: context),
                       fetch: { window.sortBy.insert(SortDescriptor(\.year), at: 0); return window }(), key: \.year, fingerprint: novel)

        let long = FetchRequest<Author>(predicate: #Predicate { $0.novels.contains { $0.pages > 30 } }, sortBy: [SortDescriptor(\.name)])
        let q5 = Check("authors of long novels", try context.liveQuery(long), try LiveResultsObserver(long, in: context), fetch: long, key: { _ in NoSection() }, fingerprint: author)

        var byRating = FetchRequest<Author>(sortBy: [SortDescriptor(\.name, order: .reverse)])
        let q6 = Check("authors by rating", try context.liveQuery(byRating, sectionedBy: \.rating), try LiveResultsObserver(byRating, sectionedBy: \.rating, in: context),
                       fetch: { byRating.sortBy.insert(SortDescriptor(\.rating), at: 0); return byRating }(), key: \.rating, fingerprint: author)

        let short = FetchRequest<Novel>(predicate: #Predicate { $0.pages < 30 })
        let q7 = Check("short, unsorted", try context.liveQuery(short), try LiveResultsObserver(short, in: context), fetch: short, key: { _ in NoSection() }, fingerprint: novel)

        let top = FetchRequest<Novel>(sortBy: [SortDescriptor(\.pages, order: .reverse)], fetchLimit: 4)
        let q8 = Check("longest four", try context.liveQuery(top), try LiveResultsObserver(top, in: context), fetch: top, key: { _ in NoSection() }, fingerprint: novel)
        return [q1, q2, q3, q4, q5, q6, q7, q8]
    }

    /// Runs `steps` random steps against `observer`'s live queries: edits in the observer
    /// (checked at once), saves of a sibling context or of a child of the observer, the
    /// observer's own saves and rollbacks; after each, the observer merges and every check
    /// verifies its last result turned into the new one, equal to a fresh fetch. `edit` makes one
    /// random change in the context it is given.
    static func drive(_ steps: Int, seed: UInt64, container: PersistentContainer, observer: BackgroundContext, checks: [any Verifiable],
                      edit: @escaping @Sendable (inout Dice, ManagedObjectContext) throws -> Void) throws {
        var dice = Dice(seed: seed)
        for step in 0..<steps {
            let roll = dice.next(20)
            if roll < 8 {
                dice = try observer.performAndWait { context in
                    var d = dice
                    for _ in 0...d.next(3) { try edit(&d, context) }
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
                    for _ in 0...d.next(3) { try edit(&d, context) }
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
    }

    @Test("Random local edits, sibling and child saves, own saves, rollbacks and cascades: every change turns the last result into the new one, which a fresh fetch equals",
          .serialized, .ownThreads, arguments: [StoreKind.inMemory, .sqlite], [1, 2] as [UInt64])
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
        let steps = 2_500
        try Self.drive(steps, seed: seed, container: container, observer: observer, checks: checks, edit: Self.edit)
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
            #expect(context.observation.liveQueries.isEmpty)
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

extension LiveQueryTests {
    /// A stream and an observer of one request, and whether each delivered since last asked.
    @MainActor
    struct Probe {
        let name: String
        /// The stream's next element's change, if an element came.
        let stream: () throws -> ResultChanges?
        /// The observer's new change, if its result changed.
        let observer: () -> ResultChanges?

        init<Key>(_ name: String, _ live: LiveQuery<Novel, Key>, _ observer: LiveResultsObserver<Novel, Key>) throws {
            self.name = name
            // The first element comes, even for an empty result.
            let first = try #require(try live.channel.poll(), "\(name): no first element")
            #expect(first.changes == nil)
            #expect(first.sections == observer.results.sections)
            stream = { try live.channel.poll()?.changes }
            let fired = Counter()
            func track() { withObservationTracking { _ = observer.results } onChange: { fired.add() } }
            track()
            self.observer = {
                defer {
                    fired.reset()
                    track()
                }
                return fired.value > 0 ? observer.results.changes : nil
            }
        }
    }

    @Test("A change that leaves a live query's result as it was delivers no element, to a stream or an observer (plain, sorted, sectioned, windowed, empty); an update of an object in the result does",
          arguments: StoreKind.allCases)
    @MainActor
    func unchangedResultDeliversNothing(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let view = container.viewContext
        // N1…N10 of 10…100 pages, in 2000 and 2001.
        let novels = (1...10).map { i in
            let novel = Novel(title: "N\(i)", pages: 10 * i)
            novel.year = 2000 + i % 2
            return novel
        }
        for novel in novels { view.insert(novel) }
        try view.save()
        let ids = novels.map(\.objectID)
        let long = #Predicate<Novel> { $0.pages >= 50 }
        let plain = FetchRequest<Novel>(predicate: long)
        let sorted = FetchRequest<Novel>(predicate: long, sortBy: [SortDescriptor(\.title)])
        let window = FetchRequest<Novel>(sortBy: [SortDescriptor(\.pages, order: .reverse)], fetchLimit: 3, fetchOffset: 2)   // 80, 70, 60 pages
        let none = FetchRequest<Novel>(predicate: #Predicate { $0.pages > 1_000 })
        let probes = [
            try Probe("plain", try view.liveQuery(plain), try LiveResultsObserver(plain, in: view)),
            try Probe("sorted", try view.liveQuery(sorted), try LiveResultsObserver(sorted, in: view)),
            try Probe("sectioned", try view.liveQuery(sorted, sectionedBy: \.year), try LiveResultsObserver(sorted, sectionedBy: \.year, in: view)),
            try Probe("window", try view.liveQuery(window), try LiveResultsObserver(window, in: view)),
            try Probe("empty", try view.liveQuery(none), try LiveResultsObserver(none, in: view)),
        ]
        func expectDeliveries(_ expected: Set<String>, stream: Bool = true, observer: Bool = true, after what: String) throws {
            for probe in probes {
                let streamed = try probe.stream()
                if stream { #expect((streamed != nil) == expected.contains(probe.name), "\(probe.name)'s stream after \(what)") }
                #expect(streamed?.isEmpty != true, "\(probe.name)'s stream after \(what): an empty change")
                let observed = probe.observer()
                if observer { #expect((observed != nil) == expected.contains(probe.name), "\(probe.name)'s observer after \(what)") }
                #expect(observed?.isEmpty != true, "\(probe.name)'s observer after \(what): an empty change")
            }
        }
        func elsewhere(_ edit: @escaping @Sendable (ManagedObjectContext) throws -> Void) throws {
            try container.newBackgroundContext(name: "elsewhere").performAndWait { context in
                try edit(context)
                try context.save()
            }
            view.mergePendingSaves()
            view.processPendingChanges()
        }

        try elsewhere { $0.insert(Novel(title: "brief", pages: 5)) }
        try expectDeliveries([], after: "a saved insertion no query shows")
        try elsewhere { try $0.existingObject(with: ids[0]).pages = 25 }
        try expectDeliveries([], after: "a saved change of what the queries read, of a novel none shows")
        try elsewhere { try $0.existingObject(with: ids[0]).title = "Z" }
        try expectDeliveries([], after: "a saved change of the sort key of a novel none shows")
        try elsewhere { $0.delete(try $0.existingObject(with: ids[1])) }
        try expectDeliveries([], after: "a saved deletion of a novel none shows")
        novels[0].pages = 15
        view.processPendingChanges()
        try expectDeliveries([], after: "an unsaved change of a novel none shows")
        try elsewhere { try $0.existingObject(with: ids[9]).pages = 1_000 }
        try expectDeliveries(["plain", "sorted", "sectioned"], after: "a saved change of the first novel, before the window")
        // Entering and leaving again before the stream is read: nothing to read; the observer,
        // updated at each event, saw both.
        let entering = Novel(title: "entering", pages: 85)
        view.insert(entering)
        view.processPendingChanges()
        view.delete(entering)
        view.processPendingChanges()
        try expectDeliveries([], observer: false, after: "an insertion deleted before the stream was read")
        // Updates of objects in the result are changes, also of properties the query does not read.
        try elsewhere { try $0.existingObject(with: ids[9]).year = 2003 }
        try expectDeliveries(["plain", "sorted", "sectioned"], after: "a saved change of the year of a novel all but the window show")
        try elsewhere { try $0.existingObject(with: ids[7]).title = "T" }
        try expectDeliveries(["plain", "sorted", "sectioned", "window"], after: "a saved change of a novel in every result")
    }
}

/// Live query streams read from other tasks than their context's: coalescing, cancellation,
/// the context's end (run under ThreadSanitizer too).
@Suite("Live query streams", .timeLimit(.minutes(5)))
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
                // a after b, then before it again… (never its saved 1: a change back to the
                // saved values names every property, see `changedBackToSavedValue`)
                a.pages = i % 2 == 0 ? 3 : 0
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

    @Test("A reader waiting for the next element is not woken with an empty change: a save that leaves the result as it was delivers nothing, the next one that alters it does",
          arguments: StoreKind.allCases)
    func waitingReaderGetsNoEmptyChange(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.newBackgroundContext()
        let (live, ids) = try context.performAndWait { context in
            let novels = (0..<3).map { Novel(title: "N\($0)", pages: 10 * $0) }
            for novel in novels { context.insert(novel) }
            try context.save()
            let request = FetchRequest<Novel>(predicate: #Predicate { $0.pages >= 10 }, sortBy: [SortDescriptor(\.pages)], fetchLimit: 1)
            return (try context.liveQuery(request), novels.map(\.objectID))
        }
        var iterator = live.makeAsyncIterator()
        #expect(try await iterator.next()?.items == [ids[1]])
        let reader = Task {
            var iterator = live.makeAsyncIterator()   // on the same channel: the next element
            return try await iterator.next()
        }
        try await Task.sleep(for: .milliseconds(50))   // the reader waits
        try context.performAndWait { context in
            // Neither changes the window: N0 still has too few pages, N2 still comes after N1.
            try context.existingObject(with: ids[0]).pages = 5
            context.processPendingChanges()
            try context.existingObject(with: ids[2]).pages = 30
            try context.save()
        }
        try await Task.sleep(for: .milliseconds(50))   // the reader looked, and waits again
        try context.performAndWait { context in
            try context.existingObject(with: ids[1]).pages = 40   // N2 now comes first
            try context.save()
        }
        let next = try #require(try await reader.value)
        #expect(next.items == [ids[2]])
        #expect(next.changes?.deletedItems == [ResultPosition(section: 0, item: 0)])
        #expect(next.changes?.insertedItems == [ResultPosition(section: 0, item: 0)])
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

extension LiveQueryStreamTests {
    @Test("A reader in a new task, after the one before it was cancelled, waits for the next result instead of spinning, and gets it")
    func readerAfterCancelledReaderWaits() async throws {
        let container = try StoreKind.inMemory.makeGraphContainer()
        let context = container.newBackgroundContext()
        let live = try context.performAndWait { context in
            context.insert(Novel(title: "a", pages: 1))
            try context.save()
            return try context.liveQuery(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)]))
        }
        let first = Task {
            var iterator = live.makeAsyncIterator()
            _ = try await iterator.next()     // the first result
            return try await iterator.next()  // waits, then is cancelled
        }
        try await Task.sleep(for: .milliseconds(50))
        first.cancel()
        #expect(try await first.value == nil)

        let second = Task {
            var iterator = live.makeAsyncIterator()
            return try await iterator.next()
        }
        try await Task.sleep(for: .milliseconds(50))
        let waitsBefore = live.channel.waits
        try await Task.sleep(for: .milliseconds(200))
        // A waiting reader starts one wait; a spinning one starts thousands in 200 ms.
        #expect(live.channel.waits - waitsBefore == 0)
        try context.performAndWait { context in
            context.insert(Novel(title: "b", pages: 2))
            try context.save()
        }
        let next = try #require(try await second.value)
        #expect(next.count == 2)
        #expect(next.changes?.insertedItems == [ResultPosition(section: 0, item: 1)])
    }
}

/// Counts calls from any thread.
final class Counter: Sendable {
    private let count = Locked(0)
    func add() { count.withLock { $0 += 1 } }
    func reset() { count.withLock { $0 = 0 } }
    var value: Int { count.withLock { $0 } }
}

extension LiveQueryStreamTests {
    @Test("Another container's commits (another coordinator, as another process) reach a live query on the view context: a renamed author moves their novels", .timeLimit(.minutes(5)))
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
    @Test("A live query that cannot be evaluated again (its store closed) ends its stream with the store's error, and an observer keeps it, instead of trapping or going quiet", .timeLimit(.minutes(5)))
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

extension LiveQueryTests {
    @Test("A property changed and then changed back to its saved value, both unsaved: the object leaves the result and comes back", arguments: StoreKind.allCases)
    func changedBackToSavedValue(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        try container.newBackgroundContext().performAndWait { context in
            for title in ["A", "B"] {
                let novel = Novel(title: title)
                novel.year = 2001
                context.insert(novel)
            }
            try context.save()
            let live = try context.liveQuery(FetchRequest<Novel>(predicate: #Predicate { $0.year == 2001 }, sortBy: [SortDescriptor(\.title)]))
            func titles() throws -> [String]? { try live.channel.poll().map { try $0.items.map { try context.object(with: $0).title } } }
            #expect(try titles() == ["A", "B"])
            let a = try #require(try context.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.title == "A" })).first)
            a.year = 2000
            context.processPendingChanges()
            #expect(try titles() == ["B"])
            a.year = 2001
            context.processPendingChanges()
            #expect(try titles() == ["A", "B"])
            a.title = "C"
            context.processPendingChanges()
            #expect(try titles() == ["B", "C"])
            a.title = "A"
            context.processPendingChanges()
            let back = try #require(try live.channel.poll())
            #expect(try back.items.map { try context.object(with: $0).title } == ["A", "B"])
            // The context compares with the saved values, so it cannot say which property went
            // back: the update names every one.
            #expect(back.changes?.updatedItems.first?.properties.isSuperset(of: ["title", "year"]) == true)
        }
    }
}
