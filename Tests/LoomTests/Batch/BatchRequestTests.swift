import Foundation
import Testing
@_spi(LoomStore) @_spi(LoomTesting) import LoomCore
import Loom
import LoomSQL

/// Batch requests: the store changed as the same changes made object by object would change it
/// (differential, on a random graph with every kind of relationship and delete rule), a refusal
/// changes nothing, and contexts reflect every request without user code.
@Suite("Batch requests")
struct BatchRequestTests {
    /// Every row of every entity (key, version, values) and every join-table pair: the whole
    /// store, comparable between two stores built the same way.
    ///
    /// Keys, foreign keys and orders are written as the key's rank among its entity's keys
    /// (`#0` is the smallest): two stores built alike can hand out different keys, since a key
    /// block reserved ahead that crosses a synchronous reservation is left unused (a gap).
    static func dump(_ container: PersistentContainer, keys: Bool = true) throws -> [String] {
        let store = container.coordinator.store
        let schema = container.schema
        var ranks: [String: [Int64: Int]] = [:]
        for entity in schema.entities {
            let sorted = try store.fetchKeys(StoreQuery(entity: entity)).sorted()
            ranks[entity.name] = Dictionary(uniqueKeysWithValues: sorted.enumerated().map { ($1, $0) })
        }
        func rank(_ entityName: String, _ key: Int64) -> String {
            ranks[entityName]?[key].map { "#\($0)" } ?? "\(entityName)/\(key) (no such row)"
        }
        func value(_ entity: EntityDescription, _ slot: Int, _ value: StoredValue) -> String {
            switch (entity.storedValue(at: slot), value) {
            case (.foreignKey(let r), .integer(let key)):
                return rank(r.destinationEntityName, key)
            case (.order(let r), .blob(let data)):
                let keys = stride(from: 0, to: data.count, by: 8).map { i in
                    data[data.startIndex + i ..< data.startIndex + i + 8].reversed().reduce(Int64(0)) { $0 << 8 | Int64($1) }
                }
                return "[" + keys.map { rank(r.destinationEntityName, $0) }.joined(separator: ", ") + "]"
            default:
                return "\(value)"
            }
        }
        var lines: [String] = []
        for entity in schema.entities {
            for row in try store.fetch(StoreQuery(entity: entity)) {
                let values = row.values.enumerated().map { value(entity, $0, $1) }.joined(separator: ", ")
                lines.append(keys ? "\(entity.name)\(rank(entity.name, row.key)) v\(row.version) \(values)" : "\(entity.name) v\(row.version) \(values)")
            }
            let keys = try store.fetchKeys(StoreQuery(entity: entity))
            for r in schema.relationships(of: entity) where r.description.isToMany && r.inverse.isToMany {
                for pair in try store.fetchRelated(r, keys: keys) {
                    lines.append("\(entity.name).\(r.description.name) \(rank(entity.name, pair.owner)) → \(rank(r.description.destinationEntityName, pair.row.key))")
                }
            }
        }
        return lines.sorted()
    }

    /// The same random library in a container: publishers, authors (with profiles, mentors),
    /// novels with tags, chapters and reviews.
    @MainActor
    static func library(_ kind: StoreKind, seed: UInt64) throws -> PersistentContainer {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        var random = SeededGenerator(seed: seed)
        let publishers = (0..<3).map { Publisher(name: "P\($0)") }
        let tags = (0..<6).map { Tag(name: "T\($0)") }
        for tag in tags { context.insert(tag) }
        for publisher in publishers { context.insert(publisher) }
        var authors: [Author] = []
        for i in 0..<24 {
            let author = Author(name: "A\(i)", rating: Int.random(in: 0..<10, using: &random))
            context.insert(author)
            if Bool.random(using: &random) { author.publisher = publishers.randomElement(using: &random) }
            if Bool.random(using: &random) { author.profile = Profile(bio: "bio \(i)") }
            if !authors.isEmpty && Bool.random(using: &random) { author.mentor = authors.randomElement(using: &random) }
            for n in 0..<Int.random(in: 0..<4, using: &random) {
                let novel = Novel(title: "N\(i)-\(n)", pages: Int.random(in: 50..<500, using: &random), author: author)
                context.insert(novel)
                for tag in tags where Int.random(in: 0..<3, using: &random) == 0 { novel.tags.insert(tag) }
                for c in 0..<Int.random(in: 0..<3, using: &random) { novel.chapters.append(Chapter(title: "C\(c)")) }
                for r in 0..<Int.random(in: 0..<3, using: &random) { _ = Review(text: "R\(r)", novel: novel) }
            }
            authors.append(author)
        }
        // Some novels without an author, some chapters without a novel.
        for i in 0..<4 { context.insert(Novel(title: "Orphan \(i)", pages: 10 * i)) }
        try context.save()
        return container
    }

    @Test("A batch delete leaves the store as deleting the same objects in a context would: cascade, nullify (one-to-one, to-many, self), join rows, no-action", arguments: StoreKind.allCases, [1, 2, 3] as [UInt64])
    @MainActor
    func deleteMatchesObjectByObject(kind: StoreKind, seed: UInt64) throws {
        let batch = try Self.library(kind, seed: seed)
        let byHand = try Self.library(kind, seed: seed)
        #expect(try Self.dump(batch) == Self.dump(byHand))

        let result = try batch.viewContext.execute(BatchDeleteRequest<Author>(predicate: #Predicate { $0.rating < 4 }))
        let context = byHand.viewContext
        var deleted: Set<AnyObjectID> = []
        let token = context.addObserver(for: .didSave) { event in
            if case .didSave(let changes) = event { deleted = changes.deleted }
        }
        for author in try context.fetch(FetchRequest<Author>(predicate: #Predicate { $0.rating < 4 })) { context.delete(author) }
        try context.save()
        context.removeObserver(token)

        #expect(try Self.dump(batch) == Self.dump(byHand))
        #expect(Set(result.deleted.map(\.description)) == Set(deleted.map(\.description)))
        #expect(!result.deleted.isEmpty)
    }

    @Test("A batch delete through to-one and many-to-many sides (novels), and by IDs, matches a context too", arguments: StoreKind.allCases)
    @MainActor
    func deleteNovelsMatchesObjectByObject(kind: StoreKind) throws {
        let batch = try Self.library(kind, seed: 7)
        let byHand = try Self.library(kind, seed: 7)
        try batch.viewContext.execute(BatchDeleteRequest<Novel>(predicate: #Predicate { $0.pages > 200 }))
        for novel in try byHand.viewContext.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.pages > 200 })) { byHand.viewContext.delete(novel) }
        try byHand.viewContext.save()
        #expect(try Self.dump(batch) == Self.dump(byHand))

        let tags = try batch.viewContext.fetch(FetchRequest<Tag>(sortBy: [SortDescriptor(\.name)])).prefix(2).map(\.objectID)
        try batch.viewContext.execute(BatchDeleteRequest<Tag>(objectIDs: Array(tags)))
        for tag in try byHand.viewContext.fetch(FetchRequest<Tag>(sortBy: [SortDescriptor(\.name)])).prefix(2) { byHand.viewContext.delete(tag) }
        try byHand.viewContext.save()
        #expect(try Self.dump(batch) == Self.dump(byHand))
    }

    @Test("A batch delete of more rows than one statement deletes (novels with tags, chapters and reviews, in several groups of keys) matches a context", arguments: StoreKind.allCases)
    @MainActor
    func largeDeleteMatchesObjectByObject(kind: StoreKind) throws {
        func make() throws -> PersistentContainer {
            let container = try kind.makeGraphContainer()
            let context = container.viewContext
            let tags = (0..<4).map { Tag(name: "T\($0)") }
            let author = Author(name: "Prolific", rating: 5)
            context.insert(author)
            for i in 0..<(2 * SQLGenerator.keysPerDelete + 40) {
                let novel = Novel(title: "N\(i)", pages: i % 3 == 0 ? 100 : 300, author: author)
                context.insert(novel)
                novel.tags.insert(tags[i % tags.count])
                if i % 2 == 0 { novel.chapters.append(Chapter(title: "C\(i)")) }
                if i % 5 == 0 { _ = Review(text: "R\(i)", novel: novel) }
            }
            try context.save()
            return container
        }
        let batch = try make(), byHand = try make()
        let result = try batch.viewContext.execute(BatchDeleteRequest<Novel>(predicate: #Predicate { $0.pages > 200 }))
        for novel in try byHand.viewContext.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.pages > 200 })) { byHand.viewContext.delete(novel) }
        try byHand.viewContext.save()
        #expect(result.deleted.count > 2 * SQLGenerator.keysPerDelete)
        #expect(try Self.dump(batch) == Self.dump(byHand))
    }

    @Test("A deny rule that still holds an object refuses the whole batch delete, naming the object, and changes nothing", arguments: StoreKind.allCases)
    @MainActor
    func denyRefusesEverything(kind: StoreKind) throws {
        let container = try Self.library(kind, seed: 1)
        let before = try Self.dump(container)
        let error = #expect(throws: LoomError.self) {
            try container.viewContext.execute(BatchDeleteRequest<Publisher>())
        }
        #expect(error?.code == .deleteDenied)
        #expect(error?.entityName == "Publisher")
        #expect(error?.attributeNames == ["authors"])
        #expect(error?.message.contains("Publisher/") == true)
        #expect(try Self.dump(container) == before)
        // With their authors deleted in the same request's cascade… they are not: the rule
        // holds. Deleting the authors first lets the publishers go.
        try container.viewContext.execute(BatchDeleteRequest<Author>())
        let result = try container.viewContext.execute(BatchDeleteRequest<Publisher>())
        #expect(result.deleted.count == 3)
        #expect(try container.viewContext.count(for: FetchRequest<Novel>()) == 4)   // the orphans
    }

    @Test("A batch update sets the values a context would, advances versions, skips objects already equal, and records the changed attributes in the history", arguments: StoreKind.allCases)
    @MainActor
    func updateMatchesObjectByObject(kind: StoreKind) throws {
        let batch = try Self.library(kind, seed: 4)
        let byHand = try Self.library(kind, seed: 4)
        let token = try batch.viewContext.currentHistoryToken()
        let result = try batch.viewContext.execute(BatchUpdateRequest<Novel>(predicate: #Predicate { $0.pages < 300 }, set: [.set(\.pages, to: 300), .set(\.year, to: 2026)]))
        var changed = 0
        for novel in try byHand.viewContext.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.pages < 300 })) {
            novel.pages = 300
            novel.year = 2026
            changed += 1
        }
        try byHand.viewContext.save()
        #expect(try Self.dump(batch) == Self.dump(byHand))
        #expect(result.updated.count == changed && result.unchanged == 0)

        // Again: nothing left to change.
        let again = try batch.viewContext.execute(BatchUpdateRequest<Novel>(predicate: #Predicate { $0.pages == 300 }, set: [.set(\.pages, to: 300)]))
        #expect(again.updated.isEmpty)
        #expect(again.unchanged == (try batch.viewContext.count(for: FetchRequest<Novel>(predicate: #Predicate { $0.pages == 300 }))))
        if kind == .sqlite {
            let history = try batch.viewContext.fetchHistory(HistoryDescriptor(after: token))
            let updates = history.flatMap(\.changes).filter { if case .update = $0.kind { return true }; return false }
            #expect(updates.count == changed)
            #expect(updates.allSatisfy { if case .update(let names) = $0.kind { return Set(names) == ["pages", "year"] }; return false })
        }
    }

    @Test("Bad batch requests are errors that say what, and change nothing", arguments: StoreKind.allCases)
    @MainActor
    func badRequests(kind: StoreKind) throws {
        let container = try Self.library(kind, seed: 5)
        let before = try Self.dump(container)
        let context = container.viewContext
        let required = #expect(throws: LoomError.self) {
            try context.execute(BatchUpdateRequest<Book>(set: [.set(\.title, to: "x")]))   // Book is not in this model
        }
        #expect(required?.code == .unknownEntity)
        let relationship = #expect(throws: LoomError.self) {
            try context.execute(BatchUpdateRequest<Novel>(set: [.set(\.author?.name, to: "Nobody")]))
        }
        #expect(relationship?.code == .invalidRequest)
        #expect(relationship?.message.contains("not one of its attributes") == true)
        let unique = #expect(throws: LoomError.self) {
            try context.execute(BatchUpdateRequest<Author>(set: [.set(\.name, to: "Same")]))
        }
        #expect(unique?.code == .uniquenessViolation)
        let missing = #expect(throws: LoomError.self) {
            try context.execute(BatchInsertRequest<Author>(rows: [[.set(\.name, to: "New")], [.set(\.rating, to: 3)]]))
        }
        #expect(missing?.code == .missingRequiredValue)
        #expect(missing?.message.contains("Row 1") == true)
        let duplicate = #expect(throws: LoomError.self) {
            try context.execute(BatchInsertRequest<Author>(rows: [[.set(\.name, to: "Fresh")], [.set(\.name, to: "A3")]]))
        }
        #expect(duplicate?.code == .uniquenessViolation)
        #expect(duplicate?.message.contains("Row 1") == true)
        #expect(try Self.dump(container) == before)
    }

    @Test("A batch insert uniques by the constraint: update changes only what differs, ignore skips, repeated rows count once; equal to inserting and updating in a context", arguments: StoreKind.allCases)
    @MainActor
    func insertUniquing(kind: StoreKind) throws {
        let batch = try kind.makeContainer()
        let byHand = try kind.makeContainer()
        for container in [batch, byHand] {
            for i in 0..<10 { container.viewContext.insert(Book(isbn: "\(i)", title: "Old \(i)", pages: i)) }
            try container.viewContext.save()
        }
        // Half existing (one of them unchanged), half new, one new row repeated.
        var rows: [[BatchValue<Book>]] = []
        for i in 5..<15 { rows.append([.set(\.isbn, to: "\(i)"), .set(\.title, to: i == 5 ? "Old 5" : "New \(i)")]) }
        rows.append([.set(\.isbn, to: "14"), .set(\.title, to: "New 14 again"), .set(\.pages, to: 140)])
        let result = try batch.viewContext.execute(BatchInsertRequest(rows: rows, uniquing: .update))
        #expect(result.inserted.count == 5)
        #expect(result.updated.count == 4)
        #expect(result.unchanged == 1)

        let context = byHand.viewContext
        for i in 6..<10 {
            let isbn = "\(i)"
            try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == isbn })).first!.title = "New \(i)"
        }
        for i in 10..<14 { context.insert(Book(isbn: "\(i)", title: "New \(i)")) }
        context.insert(Book(isbn: "14", title: "New 14 again", pages: 140))
        try context.save()
        // Keys differ (a context reserves them in blocks): rows are compared by their values.
        #expect(try Self.dump(batch, keys: false) == Self.dump(byHand, keys: false))

        let ignored = try batch.viewContext.execute(BatchInsertRequest<Book>(rows: [[.set(\.isbn, to: "1"), .set(\.title, to: "Ignored")], [.set(\.isbn, to: "99"), .set(\.title, to: "Kept")]], uniquing: .ignore))
        #expect(ignored.inserted.count == 1 && ignored.unchanged == 1)
        #expect(try batch.viewContext.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "1" })).first?.title == "Old 1")
    }

    @Test("With resultType .counts a request changes the store exactly as with IDs, and its result holds the same counts and no IDs", arguments: StoreKind.allCases)
    @MainActor
    func countsOnly(kind: StoreKind) throws {
        let withIDs = try Self.library(kind, seed: 5)
        let counted = try Self.library(kind, seed: 5)
        var delete = BatchDeleteRequest<Author>(predicate: #Predicate { $0.rating < 5 })
        let listed = try withIDs.viewContext.execute(delete)
        delete.resultType = .counts
        let counts = try counted.viewContext.execute(delete)
        #expect(try Self.dump(withIDs) == Self.dump(counted))
        #expect(counts.deletedCount == listed.deleted.count && counts.updatedCount == listed.updated.count)
        #expect(listed.deletedCount == listed.deleted.count && listed.updatedCount == listed.updated.count && listed.deletedCount > 0)
        #expect(counts.deleted.isEmpty && counts.updated.isEmpty)

        let rows: [[BatchValue<Book>]] = (0..<20).map { i in
            [.set(\.isbn, to: "c\(i % 15)"), .set(\.title, to: "T\(i)"), .set(\.rating, to: i.isMultiple(of: 2) ? nil : Double(i)),
             .set(\.published, to: Date(timeIntervalSince1970: Double(i))), .set(\.genre, to: .history)]
        }
        let booksWithIDs = try kind.makeContainer()
        let booksCounted = try kind.makeContainer()
        var insert = BatchInsertRequest(rows: rows, uniquing: .update)
        let insertedWithIDs = try booksWithIDs.viewContext.execute(insert)
        insert.resultType = .counts
        let insertedCounted = try booksCounted.viewContext.execute(insert)
        #expect(try Self.dump(booksWithIDs) == Self.dump(booksCounted))
        #expect(insertedCounted.insertedCount == 15 && insertedWithIDs.inserted.count == 15 && insertedWithIDs.insertedCount == 15)
        #expect(insertedCounted.updatedCount == insertedWithIDs.updated.count)
        #expect(insertedCounted.inserted.isEmpty && insertedCounted.objectIDs.isEmpty && insertedWithIDs.objectIDs.count == 20)
        // Values converted when the request was made (an optional's nil, a Date) and by the
        // attribute's codec (an enum) read back as a context saved them.
        let books = try booksCounted.viewContext.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
        #expect(books.count == 15)
        let c0 = try #require(books.first { $0.isbn == "c0" })
        #expect(c0.title == "T15" && c0.rating == 15 && c0.published == Date(timeIntervalSince1970: 15) && c0.genre == .history)
        let c6 = try #require(books.first { $0.isbn == "c6" })
        #expect(c6.title == "T6" && c6.rating == nil && c6.genre == .history)
    }

    @Test("Contexts stay true: a batch run on a background context reaches the view context with no user code — new values, deleted objects, inserted ones, one objectsDidChange each", arguments: StoreKind.allCases)
    @MainActor
    func contextsStayTrue(kind: StoreKind) async throws {
        let container = try Self.library(kind, seed: 9)
        let view = container.viewContext
        // Loaded here: every author and novel, with their values.
        let authors = try view.fetch(FetchRequest<Author>())
        let novels = try view.fetch(FetchRequest<Novel>())
        for author in authors { _ = author.name; _ = author.novels.count }
        for novel in novels { _ = novel.pages }
        var events: [ObjectChanges] = []
        let token = view.addObserver(for: .objectsDidChange) { event in
            if case .objectsDidChange(let changes) = event { events.append(changes) }
        }
        let background = container.newBackgroundContext()
        let (deleted, updated, inserted) = try await background.perform { context in
            let deleted = try context.execute(BatchDeleteRequest<Author>(predicate: #Predicate { $0.rating >= 7 }))
            let updated = try context.execute(BatchUpdateRequest<Novel>(set: [.set(\.pages, to: 1)]))
            let inserted = try context.execute(BatchInsertRequest<Tag>(rows: [[BatchValue<Tag>.set(\.name, to: "Fresh")]]))
            return (Set(deleted.deleted), Set(updated.updated), Set(inserted.inserted))
        }
        try await settle {
            authors.allSatisfy { !deleted.contains($0.objectID.erased) || $0.isDeleted }
                && novels.allSatisfy { deleted.contains($0.objectID.erased) || $0.pages == 1 }
        }
        view.removeObserver(token)
        #expect(!deleted.isEmpty && !updated.isEmpty && inserted.count == 1)
        for author in authors where deleted.contains(author.objectID.erased) { #expect(author.isDeleted) }
        for novel in novels where !deleted.contains(novel.objectID.erased) { #expect(novel.pages == 1) }
        let fresh = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Author>()).map { "\($0.name) \($0.novels.map(\.title).sorted())" }.sorted()
        }
        let seen = try view.fetch(FetchRequest<Author>()).map { "\($0.name) \($0.novels.map(\.title).sorted())" }.sorted()
        #expect(seen == fresh)
        #expect(try view.fetch(FetchRequest<Tag>(predicate: #Predicate { $0.name == "Fresh" })).count == 1)
        #expect(events.contains { !$0.deleted.isDisjoint(with: deleted) })
    }
    @Test("A batch insert and update relate to-one relationships by ID, as a context would; a loaded inverse list follows; a missing object, a one-to-one and an ordered inverse are refused", arguments: StoreKind.allCases)
    @MainActor
    func relateByID(kind: StoreKind) async throws {
        let batch = try Self.library(kind, seed: 11)
        let byHand = try Self.library(kind, seed: 11)
        let view = batch.viewContext
        let authors = try view.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)]))
        let first = authors[0], second = authors[1]
        let before = first.novels.count   // loaded here
        let firstID = first.objectID, secondID = second.objectID
        let rows: [[BatchValue<Novel>]] = (0..<5).map { i in
            [.set(\.title, to: "Imported \(i)"), .set(\.pages, to: i), .relate(\.author, to: i < 3 ? firstID : secondID)]
        }
        let background = batch.newBackgroundContext()
        let result = try await background.perform { context in try context.execute(BatchInsertRequest(rows: rows)) }
        #expect(result.objectIDs.count == 5 && result.objectIDs == result.inserted)
        try await settle { first.novels.count == before + 3 }
        // Moves two of them to the second author.
        let moved = Array(result.objectIDs.prefix(2))
        try await background.perform { context in
            _ = try context.execute(BatchUpdateRequest<Novel>(predicate: #Predicate { $0.title == "Imported 0" || $0.title == "Imported 1" }, set: [.relate(\.author, to: nil)]))
            _ = try context.execute(BatchUpdateRequest<Novel>(predicate: #Predicate { $0.author == nil && $0.title.starts(with: "Imported") }, set: [.relate(\.author, to: secondID)]))
        }
        try await settle { first.novels.count == before + 1 }
        #expect(Set(second.novels.map(\.objectID.erased)).isSuperset(of: moved))

        let context = byHand.viewContext
        let handFirst = try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)]))[0]
        let handSecond = try context.fetch(FetchRequest<Author>(sortBy: [SortDescriptor(\.name)]))[1]
        for i in 0..<5 { context.insert(Novel(title: "Imported \(i)", pages: i, author: i < 3 && i >= 2 ? handFirst : handSecond)) }
        try context.save()
        #expect(try Self.dump(batch, keys: false).filter { !$0.hasPrefix("Novel ") } == Self.dump(byHand, keys: false).filter { !$0.hasPrefix("Novel ") })
        let titles = { (c: PersistentContainer) in try c.viewContext.fetch(FetchRequest<Novel>(sortBy: [SortDescriptor(\.title)])).map { "\($0.title) \($0.author?.name ?? "-")" } }
        #expect(try titles(batch) == titles(byHand))

        let ghost = Author(name: "Ghost")
        view.insert(ghost)
        try view.save()
        let gone = ghost.objectID
        view.delete(ghost)
        try view.save()
        let missing = #expect(throws: LoomError.self) {
            try view.execute(BatchInsertRequest<Novel>(rows: [[.set(\.title, to: "X")], [.set(\.title, to: "Y"), .relate(\.author, to: gone)]]))
        }
        #expect(missing?.code == .objectNotFound)
        #expect(missing?.message.contains("Row 1") == true)
        let oneToOne = #expect(throws: LoomError.self) {
            try view.execute(BatchUpdateRequest<Author>(set: [.relate(\.profile, to: nil)]))
        }
        #expect(oneToOne?.code == .invalidRequest)
        let ordered = #expect(throws: LoomError.self) {
            try view.execute(BatchUpdateRequest<Chapter>(set: [.relate(\.novel, to: nil)]))
        }
        #expect(ordered?.code == .invalidRequest)
    }
    @Test("Uniquing by a constraint of several attributes, thousands of rows at once: matched on every attribute", arguments: StoreKind.allCases)
    @MainActor
    func insertUniquingByTwoAttributes(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let first = (0..<3_000).map { i in [BatchValue<Shelf>.set(\.room, to: "R\(i % 30)"), .set(\.position, to: i / 30), .set(\.label, to: "old")] }
        #expect(try context.execute(BatchInsertRequest(rows: first)).inserted.count == 3_000)
        // The same rooms with positions shifted by 50: half match, half are new.
        let second = (0..<3_000).map { i in [BatchValue<Shelf>.set(\.room, to: "R\(i % 30)"), .set(\.position, to: i / 30 + 50), .set(\.label, to: "new")] }
        let result = try context.execute(BatchInsertRequest(rows: second, uniquing: .update))
        #expect(result.inserted.count == 1_500 && result.updated.count == 1_500)
        #expect(try context.count(for: FetchRequest<Shelf>()) == 4_500)
        #expect(try context.count(for: FetchRequest<Shelf>(predicate: #Predicate { $0.label == "new" })) == 3_000)
    }
    struct AuthorJSON: Codable, Sendable {
        let name: String
        let rating: Int
        let publisher: String?
    }

    @Test("A uniqued import from JSON inserts and updates by the unique key, links publishers by name with one lookup per chunk, commits per chunk and reports progress; a throwing hook or a missing link stops at its chunk, the chunks before it kept", arguments: StoreKind.allCases)
    @MainActor
    func uniquedImport(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        for name in ["P0", "P1"] { context.insert(Publisher(name: name)) }
        for i in 0..<100 { context.insert(Author(name: "A\(i)", rating: 0)) }
        try context.save()
        let json = try JSONEncoder().encode((0..<250).map { AuthorJSON(name: "A\($0)", rating: $0 % 3, publisher: $0 % 5 == 0 ? nil : "P\($0 % 2)") })
        let sources = try JSONDecoder().decode([AuthorJSON].self, from: json)
        var reports: [ImportProgress] = []
        let request = ImportRequest<Author, AuthorJSON>(sources, chunkSize: 60) { author in
            [.set(\.name, to: author.name), .set(\.rating, to: author.rating)]
        }.linking(\.publisher, to: \Publisher.name, by: \.publisher)
        let result = try context.execute(request) { reports.append($0) }
        #expect(reports.map(\.completed) == [60, 120, 180, 240, 250])
        #expect(result.inserted == 150)
        // Of the 100 saved ones, those given a publisher or a rating changed; A0, A5… with rating 0 and no publisher are unchanged.
        let unchanged = (0..<100).filter { $0 % 5 == 0 && $0 % 3 == 0 }.count
        #expect(result.updated == 100 - unchanged && result.unchanged == unchanged)
        let authors = try context.fetch(FetchRequest<Author>())
        #expect(authors.count == 250)
        for author in authors {
            let i = Int(author.name.dropFirst())!
            #expect(author.rating == i % 3)
            #expect(author.publisher?.name == (i % 5 == 0 ? nil : "P\(i % 2)"))
        }
        #expect(try context.fetch(FetchRequest<Publisher>(predicate: #Predicate { $0.name == "P1" })).first?.authors.count == (0..<250).filter { $0 % 5 != 0 && $0 % 2 == 1 }.count)

        // A hook that throws in the third chunk: the first two are committed, the third is not.
        struct Refused: Error {}
        let more = (0..<200).map { AuthorJSON(name: "B\($0)", rating: 1, publisher: nil) }
        var reached = 0
        #expect(throws: Refused.self) {
            try context.execute(ImportRequest<Author, AuthorJSON>(more, chunkSize: 50) { author in
                if author.name == "B130" { throw Refused() }
                return [.set(\.name, to: author.name), .set(\.rating, to: author.rating)]
            }) { reached = $0.completed }
        }
        #expect(reached == 100)
        #expect(try context.count(for: FetchRequest<Author>(predicate: #Predicate { $0.name.starts(with: "B") })) == 100)

        // A link to a publisher nobody saved: its chunk is not written, and the error names the source.
        let dangling = [AuthorJSON(name: "C0", rating: 1, publisher: "P0"), AuthorJSON(name: "C1", rating: 1, publisher: "Nobody")]
        let error = #expect(throws: LoomError.self) {
            try context.execute(ImportRequest<Author, AuthorJSON>(dangling) { [.set(\.name, to: $0.name)] }.linking(\.publisher, to: \Publisher.name, by: \.publisher))
        }
        #expect(error?.code == .objectNotFound)
        #expect(error?.message.contains("Source 1") == true)
        #expect(try context.count(for: FetchRequest<Author>(predicate: #Predicate { $0.name.starts(with: "C") })) == 0)
    }
    @Test("Every error of a chunked import names the source by its position in the import, whatever its chunk: a missing required value, a wrong type, a uniqueness violation, a missing link", arguments: StoreKind.allCases)
    @MainActor
    func importErrorsNameTheSource(kind: StoreKind) throws {
        let container = try kind.makeContainer(Book.self, Shelf.self, Sample.self, Tally.self, Gauge.self)
        let context = container.viewContext
        let sources = Array(0..<8_000)
        // With the default chunks of 5,000, source 7,777 is row 2,777 of the second chunk.
        let missing = #expect(throws: LoomError.self) {
            try context.execute(ImportRequest<Book, Int>(sources) { i in
                i == 7_777 ? [.set(\.isbn, to: "\(i)")] : [.set(\.isbn, to: "\(i)"), .set(\.title, to: "T\(i)")]
            })
        }
        #expect(missing?.code == .missingRequiredValue)
        #expect(missing?.message.contains("Source 7777 of an import of Book") == true, "\(missing?.message ?? "")")
        #expect(try context.count(for: FetchRequest<Book>()) == 5_000)   // the first chunk, committed

        let wrongType = #expect(throws: LoomError.self) {
            try context.execute(ImportRequest<Gauge, Int>(sources, uniquingBy: [\Gauge.number]) { i in
                [.set(\.number, to: i), .set(\.reading, to: Reading(value: i == 7_777 ? -1 : i))]
            })
        }
        #expect(wrongType?.code == .typeMismatch)
        #expect(wrongType?.message.contains("source 7777 of the import") == true, "\(wrongType?.message ?? "")")

        // Uniqued by title: the isbn, unique too, of source 7,777 is source 5's, committed in the first chunk.
        let unique = #expect(throws: LoomError.self) {
            try context.execute(ImportRequest<Book, Int>(sources, uniquingBy: [\Book.title]) { i in
                [.set(\.isbn, to: "U\(i == 7_777 ? 5 : i)"), .set(\.title, to: "UT\(i)")]
            })
        }
        #expect(unique?.code == .uniquenessViolation)
        #expect(unique?.message.contains("Source 7777 of an import of Book") == true, "\(unique?.message ?? "")")
        #expect(try context.count(for: FetchRequest<Book>(predicate: #Predicate { $0.isbn.starts(with: "U") })) == 5_000)

        let graph = try kind.makeGraphContainer()
        graph.viewContext.insert(Publisher(name: "P0"))
        try graph.viewContext.save()
        let link = #expect(throws: LoomError.self) {
            try graph.viewContext.execute(ImportRequest<Author, AuthorJSON>(sources.map { AuthorJSON(name: "A\($0)", rating: 0, publisher: $0 == 7_777 ? "Nobody" : "P0") }) {
                [.set(\.name, to: $0.name)]
            }.linking(\.publisher, to: \Publisher.name, by: \.publisher))
        }
        #expect(link?.code == .objectNotFound)
        #expect(link?.message.contains("Source 7777 of an import of Author") == true, "\(link?.message ?? "")")
    }

    @Test("An import's progress counts every source once, repeats of a unique key inside a chunk and across chunks included: inserted + updated + unchanged == completed, as the documented rule says", arguments: StoreKind.allCases)
    @MainActor
    func importProgressCountsEverySource(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        for i in 0..<10 { context.insert(Author(name: "A\(i)", rating: 0)) }
        try context.save()
        // 12,000 sources for 10,000 names: repeats inside the first chunk (3,000…3,099 again at
        // 4,000…4,099, some changing the rating, some not) and in the last (0…1,999 again).
        var sources: [AuthorJSON] = []
        for i in 0..<10_000 { sources.append(AuthorJSON(name: "A\(i)", rating: i % 2, publisher: nil)) }
        for i in 4_000..<4_100 { sources[i] = AuthorJSON(name: "A\(i - 1_000)", rating: i % 4 == 0 ? 7 : (i - 1_000) % 2, publisher: nil) }
        for i in 10_000..<12_000 { sources.append(AuthorJSON(name: "A\(i - 10_000)", rating: i < 11_000 ? 5 : (i - 10_000) % 2, publisher: nil)) }
        // The rule, source by source: a new key inserts; a known one updates if it changes a value.
        var ratings = Dictionary(uniqueKeysWithValues: (0..<10).map { ("A\($0)", 0) })
        var expected = (inserted: 0, updated: 0, unchanged: 0)
        for source in sources {
            switch ratings[source.name] {
            case nil: expected.inserted += 1
            case source.rating?: expected.unchanged += 1
            default: expected.updated += 1
            }
            ratings[source.name] = source.rating
        }
        var reports: [ImportProgress] = []
        let result = try context.execute(ImportRequest<Author, AuthorJSON>(sources) { [.set(\.name, to: $0.name), .set(\.rating, to: $0.rating)] }) { reports.append($0) }
        #expect(reports.map(\.completed) == [5_000, 10_000, 12_000])
        #expect(reports.allSatisfy { $0.inserted + $0.updated + $0.unchanged == $0.completed }, "\(reports)")
        #expect(result.inserted == expected.inserted && result.updated == expected.updated && result.unchanged == expected.unchanged, "\(result) \(expected)")
        #expect(result.inserted == 10_000 - 100 - 10)
        #expect(try context.count(for: FetchRequest<Author>()) == 10_000 - 100)
        for author in try context.fetch(FetchRequest<Author>()) { #expect(author.rating == ratings[author.name]) }
    }

    @Test("A batch request is one history transaction, as a save is, however many chunks it writes: its inserts, updates and deletes each once, a related object updated by every chunk once; an import is one per committed chunk", arguments: StoreKind.persistentCases)
    @MainActor
    func oneRequestOneHistoryTransaction(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let publisher = Publisher(name: "P0")
        context.insert(publisher)
        try context.save()
        let publisherID = publisher.objectID.erased
        func history(after token: HistoryToken?) throws -> (transactions: [HistoryTransaction], changes: [HistoryChange]) {
            let transactions = try context.fetchHistory(HistoryDescriptor(after: token))
            return (transactions, transactions.flatMap(\.changes))
        }
        func kinds(_ changes: [HistoryChange]) -> [String: Int] {
            changes.reduce(into: [:]) { counts, change in
                let kind = switch change.kind { case .insert: "insert"; case .update(let names): "update " + names.joined(separator: ","); case .delete: "delete" }
                counts["\(change.objectID.entityName) \(kind)", default: 0] += 1
            }
        }
        let count = 25_000
        var token = try context.currentHistoryToken()
        let rows = (0..<count).map { [BatchValue<Author>.set(\.name, to: "A\($0)"), .relate(\.publisher, to: publisher.objectID)] }
        let inserted = try context.execute(BatchInsertRequest(rows: rows))
        var found = try history(after: token)
        #expect(found.transactions.count == 1)
        #expect(kinds(found.changes) == ["Author insert": count, "Publisher update authors": 1])
        #expect(Set(found.changes.map(\.objectID)) == Set(inserted.inserted + [publisherID]))
        token = found.transactions.last?.token

        let updated = try context.execute(BatchUpdateRequest<Author>(set: [.set(\.rating, to: 3)]))
        found = try history(after: token)
        #expect(found.transactions.count == 1)
        #expect(kinds(found.changes) == ["Author update rating": count])
        #expect(Set(found.changes.map(\.objectID)) == Set(updated.updated))
        token = found.transactions.last?.token

        // Rows repeating a key across chunks: each object once, as inserted.
        let repeated = (0..<count).map { [BatchValue<Author>.set(\.name, to: "R\($0 % 12_500)"), .set(\.rating, to: $0)] }
        try context.execute(BatchInsertRequest(rows: repeated, uniquing: .update))
        found = try history(after: token)
        #expect(found.transactions.count == 1)
        #expect(kinds(found.changes) == ["Author insert": 12_500])
        token = found.transactions.last?.token

        let deleted = try context.execute(BatchDeleteRequest<Author>())
        found = try history(after: token)
        #expect(found.transactions.count == 1)
        #expect(kinds(found.changes) == ["Author delete": count + 12_500, "Publisher update authors": 1])
        #expect(Set(found.changes.filter { $0.kind == .delete }.map(\.objectID)) == Set(deleted.deleted))
        token = found.transactions.last?.token

        // An import commits chunk by chunk: one transaction per chunk.
        try context.execute(ImportRequest<Author, Int>(Array(0..<12_000)) { [.set(\.name, to: "I\($0)")] })
        found = try history(after: token)
        #expect(found.transactions.map { $0.changes.count } == [5_000, 5_000, 2_000])
    }

    @Test("A batch request of five chunks writes its history once: one INSERT and one UPDATE of its row, never reading it back, whatever the number of chunks", arguments: StoreKind.persistentCases)
    @MainActor
    func batchHistoryWrittenOnce(kind: StoreKind) throws {
        let log = StatementLog()
        let context = try kind.makeGraphContainer(trace: log.hook).viewContext
        let count = 4 * 10_000 + 1   // five chunks
        /// The statements on `loom_history` the request ran, by their first word.
        func historyStatements(_ run: () throws -> Void) rethrows -> [String: Int] {
            log.reset()
            try run()
            return log.all.filter { $0.contains("loom_history") }.reduce(into: [:]) { counts, sql in
                counts[String(sql.prefix { $0 != " " }), default: 0] += 1
            }
        }
        var token = try context.currentHistoryToken()
        func transactionCounts() throws -> [Int] {
            let transactions = try context.fetchHistory(HistoryDescriptor(after: token))
            token = transactions.last?.token
            return transactions.map(\.changes.count)
        }
        let rows = (0..<count).map { [BatchValue<Author>.set(\.name, to: "A\($0)")] }
        #expect(try historyStatements { try context.execute(BatchInsertRequest(rows: rows)) } == ["INSERT": 1, "UPDATE": 1])
        #expect(try transactionCounts() == [count])
        #expect(try historyStatements { try context.execute(BatchUpdateRequest<Author>(set: [.set(\.rating, to: 3)])) } == ["INSERT": 1, "UPDATE": 1])
        #expect(try transactionCounts() == [count])
        #expect(try historyStatements { try context.execute(BatchDeleteRequest<Author>()) } == ["INSERT": 1, "UPDATE": 1])
        #expect(try transactionCounts() == [count])
        // One chunk: the row as a save writes it.
        #expect(try historyStatements { try context.execute(BatchInsertRequest(rows: Array(rows.prefix(10)))) } == ["INSERT": 1])
        #expect(try transactionCounts() == [10])
    }

    @Test("Inside an exclusive write, a save, a batch request of two chunks and a save stay three history transactions: the request's chunks join only their own", arguments: StoreKind.persistentCases)
    func batchHistoryInExclusiveWrite(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        try await container.performExclusiveWrite { context in
            context.insert(Book(isbn: "first", title: "Saved before"))
            try context.save()
            let rows = (0..<15_000).map { [BatchValue<Book>.set(\.isbn, to: "\($0)"), .set(\.title, to: "T")] }
            try context.execute(BatchInsertRequest(rows: rows))
            context.insert(Book(isbn: "last", title: "Saved after"))   // saved as the exclusive write ends
        }
        let counts = try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()).map(\.changes.count) }
        #expect(counts == [1, 15_000, 1])
        try await container.close()
    }

    @Test("A live query on the view context follows batch requests run on a background context: its next result equals a fetch, with the batch's changes", .timeLimit(.minutes(5)), arguments: StoreKind.allCases)
    @MainActor
    func liveQueryFollowsBatches(kind: StoreKind) async throws {
        let container = try Self.library(kind, seed: 13)
        let view = container.viewContext
        let request = FetchRequest<Novel>(predicate: #Predicate { $0.pages >= 100 }, sortBy: [SortDescriptor(\.pages), SortDescriptor(\.title)])
        var results = try view.liveQuery(request).makeAsyncIterator()
        let first = try #require(try await results.next(isolation: #isolation))
        #expect(first.items == (try view.fetch(request)).map(\.objectID))
        let background = container.newBackgroundContext()
        try await background.perform { context in
            _ = try context.execute(BatchUpdateRequest<Novel>(predicate: #Predicate { $0.pages < 150 }, set: [.set(\.pages, to: 450)]))
            _ = try context.execute(BatchDeleteRequest<Author>(predicate: #Predicate { $0.rating > 6 }))
        }
        view.mergePendingSaves()
        var latest = first
        while latest.items != (try view.fetch(request)).map(\.objectID) {
            latest = try #require(try await results.next(isolation: #isolation))
        }
        #expect(latest.changes != nil)
        #expect(latest.count < first.count || latest.changes?.movedItems.isEmpty == false)
    }
}

/// A value whose encoding fails when negative: an import's "wrong type" case (JSON stores NaN,
/// so a non-finite double no longer fails).
struct Reading: Codable, Sendable, Equatable {
    var value: Int

    init(value: Int) { self.value = value }

    init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(Int.self)
    }

    func encode(to encoder: any Encoder) throws {
        guard value >= 0 else {
            throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: encoder.codingPath, debugDescription: "a reading is never negative"))
        }
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}

@Model final class Gauge {
    var number: Int = 0
    var reading: Reading = Reading(value: 0)
    init() {}
}
