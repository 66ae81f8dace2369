import Foundation
import GRDB
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Synchronization

// The operations the fault-injection loops run (FaultInjectionTests), each on a copy of a seed
// store: the graph models' small library, or people of the transform stage's schemas.

extension FaultScenario {
    /// Every scenario, or those `LOOM_FAULT_SCENARIOS` names (comma-separated).
    static var all: [FaultScenario] {
        let every = [save, saveRestartingWAL, batchInsert, batchDelete, uniquedImport, historyPurge, checkpoint, storeOpen, lightweightMigration, transformStage]
        guard let names = ProcessInfo.processInfo.environment["LOOM_FAULT_SCENARIOS"]?.split(separator: ",").map(String.init) else { return every }
        return every.filter { names.contains($0.name) }
    }

    /// A save of inserts, updates, deletes (one cascading) and relationship changes, on the view context.
    static let save = librarySave(name: "save", options: SQLiteStore.Options())

    /// ``save`` on a store opened with `options`.
    static func librarySave(name: String, options: SQLiteStore.Options) -> FaultScenario {
        FaultScenario(name: name, seed: seedLibrary, begin: { url in
            let (container, context, told) = try await openLibrary(url, options: options)
            try changeLibrary(context)
            return FaultAttempt(operation: { try context.save() }, retry: { try context.save() }, end: { try await container.close() }, told: told)
        }, contents: libraryContents)
    }

    /// The same save on a store whose WAL bound is one byte: its commit is followed by the
    /// `TRUNCATE` checkpoint that starts the log over (``SQLiteStore/Options/maximumWALSize``),
    /// whose failure must leave the committed save whole.
    static let saveRestartingWAL: FaultScenario = {
        var options = SQLiteStore.Options()
        options.maximumWALSize = 1
        return librarySave(name: "save restarting the WAL", options: options)
    }()

    /// The save's changes: inserts, updates, deletes (one cascading) and relationship changes
    /// to the seed library, in `context` (not saved).
    static func changeLibrary(_ context: ManagedObjectContext) throws {
        let authors = try byName(context.fetch(FetchRequest<Author>()), \.name)
        let novels = try byName(context.fetch(FetchRequest<Novel>()), \.title)
        let tags = try byName(context.fetch(FetchRequest<Tag>()), \.name)
        let newcomer = Author(name: "Dee", rating: 4)
        context.insert(newcomer)
        let fresh = Novel(title: "Epsilon", pages: 90, author: newcomer)
        context.insert(fresh)
        fresh.chapters.append(Chapter(title: "e1"))
        fresh.tags.insert(tags["classic"]!)
        context.insert(Review(text: "bold", novel: fresh))
        authors["Ben"]!.rating = 7
        novels["Alpha"]!.title = "Alpha II"
        context.delete(novels["Gamma"]!)                 // cascades to its review
        novels["Delta"]!.author = authors["Ann"]
        authors["Cid"]!.mentor = authors["Ben"]
        novels["Beta"]!.tags.remove(tags["modern"]!)
    }

    /// The batch insert's rows: one updates a saved author (uniqued by name), the others insert.
    static var bulkAuthors: BatchInsertRequest<Author> {
        BatchInsertRequest<Author>(
            rows: [[.set(\.name, to: "Ann"), .set(\.rating, to: 9)]] + (0..<20).map { [.set(\.name, to: "Bulk \($0)"), .set(\.rating, to: $0)] },
            uniquing: .update)
    }

    /// A uniqued batch insert: one row updates a saved author, the others insert.
    static let batchInsert = FaultScenario(name: "batch insert", seed: seedLibrary, begin: { url in
        let (container, context, told) = try await openLibrary(url)
        let request = bulkAuthors
        return FaultAttempt(operation: { _ = try context.execute(request) }, retry: { _ = try context.execute(request) }, end: { try await container.close() }, told: told)
    }, contents: libraryContents)

    /// A batch delete whose delete rules cascade (novels, their chapters and reviews) and nullify
    /// (the students' mentor, the publisher's authors, the profile).
    static let batchDelete = FaultScenario(name: "batch delete with cascade", seed: seedLibrary, begin: { url in
        let (container, context, told) = try await openLibrary(url)
        let request = BatchDeleteRequest<Author>(predicate: #Predicate<Author> { $0.name == "Ann" })
        return FaultAttempt(operation: { _ = try context.execute(request) }, retry: { _ = try context.execute(request) }, end: { try await container.close() }, told: told)
    }, contents: libraryContents)

    /// A uniqued import linking each author to its publisher by name.
    static let uniquedImport = FaultScenario(name: "uniqued import", seed: seedLibrary, begin: { url in
        let (container, context, told) = try await openLibrary(url)
        let feed = [AuthorFeed(name: "Ann", rating: 5, publisher: "Quill")] + (0..<10).map { AuthorFeed(name: "Imported \($0)", rating: $0, publisher: "Quill") }
        let request = ImportRequest<Author, AuthorFeed>(feed, uniquingBy: [\Author.name]) { source in
            [.set(\.name, to: source.name), .set(\.rating, to: source.rating)]
        }.linking(\.publisher, to: \Publisher.name, by: \.publisher)
        return FaultAttempt(operation: { _ = try context.execute(request) }, retry: { _ = try context.execute(request) }, end: { try await container.close() }, told: told)
    }, contents: libraryContents)

    /// A history purge through the next-to-last transaction.
    static let historyPurge = FaultScenario(name: "history purge", seed: seedLibrary, begin: { url in
        let (container, context, _) = try await openLibrary(url)
        let tokens = try context.fetchHistory(HistoryDescriptor()).map(\.token)
        let token = tokens[tokens.count - 2]
        return FaultAttempt(operation: { try context.deleteHistory(through: token) }, retry: { try context.deleteHistory(through: token) }, end: { try await container.close() })
    }, contents: libraryContents, tellsOtherContexts: false)

    /// Closing a store whose write-ahead log holds a commit: the close checkpoints it into the file.
    static let checkpoint = FaultScenario(name: "checkpoint on close", seed: seedLibrary, begin: { url in
        let (container, context, _) = try await openLibrary(url)
        for author in try context.fetch(FetchRequest<Author>()) { author.rating += 10 }
        try context.save()
        // Closing again does nothing: `end` closes the container only when the operation did not run.
        return FaultAttempt(operation: { try await container.close() }, retry: { try await openLibrary(url).container.close() }, end: { try await container.close() })
    }, contents: libraryContents, tellsOtherContexts: false)

    /// Opening a store.
    static let storeOpen = FaultScenario(name: "store open", seed: seedLibrary, begin: { url in
        let opened = OpenedContainers()
        let open: @MainActor @Sendable () async throws -> Void = { opened.list.append(PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(StoreKind.graphTypes)))) }
        return FaultAttempt(operation: open, retry: open, end: { for container in opened.list { try await container.close() } })
    }, contents: libraryContents, tellsOtherContexts: false)

    /// An inferred migration that rebuilds a table (a widened attribute, a new one with a default).
    static let lightweightMigration = FaultScenario(name: "lightweight migration", seed: seedPeople, begin: { url in
        let opened = OpenedContainers()
        let open: @MainActor @Sendable () async throws -> Void = { opened.list.append(try await PersistentContainer(name: "people", for: WiderPeople.self, location: .file(url))) }
        return FaultAttempt(operation: open, retry: open, end: { for container in opened.list { try await container.close() } })
    }, contents: fileContents, afterFailure: .unchangedOrWhole, tellsOtherContexts: false)

    /// A transform stage of three chunks: its copy, its chunks and its end each commit, so a
    /// fault may leave whole steps done, which the next open resumes from.
    static let transformStage = FaultScenario(name: "transform stage in chunks", seed: seedPeople, begin: { url in
        let opened = OpenedContainers()
        let open: @MainActor @Sendable () async throws -> Void = { opened.list.append(try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: ChunkedPeoplePlan.self, location: .file(url))) }
        return FaultAttempt(operation: open, retry: open, end: { for container in opened.list { try await container.close() } })
    }, contents: fileContents, afterFailure: .committedSteps, tellsOtherContexts: false)

    // MARK: Seeds and contents

    /// A publisher, three authors (a mentor, a profile), four novels with chapters, reviews and
    /// tags, saved in three transactions.
    @Sendable static func seedLibrary(_ url: URL) async throws {
        try await seedLibrary(in: PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(StoreKind.graphTypes))))
    }

    /// The same library saved in `container`, which it closes.
    static func seedLibrary(in container: PersistentContainer) async throws {
        try await container.performBackgroundTask { context in
            let quill = Publisher(name: "Quill")
            context.insert(quill)
            let ann = Author(name: "Ann", rating: 1), ben = Author(name: "Ben", rating: 2), cid = Author(name: "Cid", rating: 3)
            for author in [ann, ben, cid] { context.insert(author) }
            ann.publisher = quill
            ben.mentor = ann
            ann.profile = Profile(bio: "novelist")
            try context.save()
            let classic = Tag(name: "classic"), modern = Tag(name: "modern")
            context.insert(classic)
            context.insert(modern)
            let alpha = Novel(title: "Alpha", pages: 100, author: ann), beta = Novel(title: "Beta", pages: 200, author: ann)
            let gamma = Novel(title: "Gamma", pages: 300, author: ben), delta = Novel(title: "Delta", pages: 400, author: cid)
            for novel in [alpha, beta, gamma, delta] { context.insert(novel) }
            alpha.chapters = [Chapter(title: "a1"), Chapter(title: "a2")]
            beta.chapters = [Chapter(title: "b1")]
            alpha.tags = [classic]
            beta.tags = [classic, modern]
            context.insert(Review(text: "fine", novel: alpha))
            context.insert(Review(text: "long", novel: gamma))
            try context.save()
            delta.pages = 410
            try context.save()
        }
        try await container.close()
    }

    /// Thirty people and three notes in a version 1.0.0 store.
    @Sendable static func seedPeople(_ url: URL) async throws {
        try await TransformMigrationTests.fillV1(try await PersistentContainer(name: "people", for: PeopleV1.self, location: .file(url)), people: 30)
    }

    /// The library's objects, each with its values and relationships by name, and how many
    /// history transactions the store holds; read through a second container on the file.
    @MainActor static func libraryContents(_ url: URL) async throws -> [String] {
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(StoreKind.graphTypes)))
        let lines = try await container.performBackgroundTask { try libraryLines($0) }
        try await container.close()
        let queue = try DatabaseQueue(path: url.path)
        defer { try? queue.close() }
        let history = try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM loom_history") ?? 0 }
        return lines + ["history transactions: \(history)"]
    }

    /// The library's objects in `context`'s store, each with its values and relationships by
    /// name, sorted.
    static func libraryLines(_ context: ManagedObjectContext) throws -> [String] {
        var lines: [String] = []
        for p in try context.fetch(FetchRequest<Publisher>()) { lines.append("publisher \(p.name) authors \(p.authors.map(\.name).sorted())") }
        for a in try context.fetch(FetchRequest<Author>()) {
            lines.append("author \(a.name) rating \(a.rating) publisher \(a.publisher?.name ?? "-") mentor \(a.mentor?.name ?? "-") profile \(a.profile?.bio ?? "-")")
        }
        for n in try context.fetch(FetchRequest<Novel>()) {
            lines.append("novel \(n.title) pages \(n.pages) author \(n.author?.name ?? "-") tags \(n.tags.map(\.name).sorted()) chapters \(n.chapters.map(\.title)) reviews \(n.reviews.map(\.text).sorted())")
        }
        for t in try context.fetch(FetchRequest<Tag>()) { lines.append("tag \(t.name)") }
        for c in try context.fetch(FetchRequest<Chapter>()) { lines.append("chapter \(c.title) of \(c.novel?.title ?? "-")") }
        for r in try context.fetch(FetchRequest<Review>()) { lines.append("review \(r.text) of \(r.novel.title)") }
        for p in try context.fetch(FetchRequest<Profile>()) { lines.append("profile \(p.bio) of \(p.author?.name ?? "-")") }
        return lines.sorted()
    }

    /// Every table's rows and the schema, read from the file without a model (the people's keys
    /// survive a migration, and every run copies the same seed).
    @MainActor static func fileContents(_ url: URL) async throws -> [String] {
        try SQLiteStore.contentDump(at: url)
    }

    /// The library opened on the view context, and what tells how many changes a second,
    /// merging context holding every author, novel and tag was told of.
    @MainActor static func openLibrary(_ url: URL, options: SQLiteStore.Options = SQLiteStore.Options()) async throws -> (container: PersistentContainer, context: ManagedObjectContext, told: @MainActor () async -> Int) {
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(StoreKind.graphTypes), options: options))
        return (container, container.viewContext, try await observer(of: container))
    }

    /// What tells how many changes a second, merging context of `container` holding every
    /// author, novel and tag was told of.
    @MainActor static func observer(of container: PersistentContainer) async throws -> @MainActor @Sendable () async -> Int {
        let observer = container.newBackgroundContext(name: "observer")
        let changes = ChangeCount()
        try await observer.perform { context in
            context.automaticallyMergesChanges = true
            context.addObserver(for: .objectsDidChange) { _ in changes.value.withLock { $0 += 1 } }
            _ = try context.fetch(FetchRequest<Author>())
            _ = try context.fetch(FetchRequest<Novel>())
            _ = try context.fetch(FetchRequest<Tag>())
        }
        let told: @MainActor @Sendable () async -> Int = {
            // A merge reaches the observer on its own queue: let it run.
            try? await Task.sleep(for: .milliseconds(2))
            await observer.perform { context in context.processPendingChanges() }
            return changes.value.withLock { $0 }
        }
        return told
    }

    static func byName<T>(_ objects: [T], _ name: KeyPath<T, String>) -> [String: T] {
        Dictionary(objects.map { ($0[keyPath: name], $0) }, uniquingKeysWith: { first, _ in first })
    }
}

/// How many `objectsDidChange` an observing context posted.
final class ChangeCount: Sendable {
    let value = Mutex(0)
}

/// The containers a run opened, closed at its end.
@MainActor final class OpenedContainers {
    var list: [PersistentContainer] = []
}

/// An author as an import's source gives it.
struct AuthorFeed: Sendable {
    let name: String
    let rating: Int
    let publisher: String?
}
