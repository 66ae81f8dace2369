import Foundation
import Loom
import Testing

/// Values and aggregates instead of objects (Core Data's dictionary results): the same answer
/// from SQL, from the in-memory store, and from a context's unsaved changes.
@MainActor
@Suite("Values and aggregates")
struct PropertyFetchTests {
    /// Six books in three genres; one without a rating.
    func library(_ kind: StoreKind) throws -> PersistentContainer {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let plan: [(String, Int, Double?, Genre)] = [
            ("Dune", 600, 4.5, .fiction), ("Emma", 400, 4.0, .fiction), ("Cosmos", 350, 5.0, .science),
            ("Gödel", 770, nil, .science), ("SPQR", 600, 3.5, .history), ("Ants", 120, 2.0, .science),
        ]
        for (i, (title, pages, rating, genre)) in plan.enumerated() {
            let book = Book(isbn: "isbn-\(i)", title: title, pages: pages)
            book.rating = rating
            book.genre = genre
            context.insert(book)
        }
        try context.save()
        return container
    }

    @Test("Attributes of each object, in the requested order", arguments: StoreKind.allCases)
    func attributes(kind: StoreKind) throws {
        let context = try library(kind).viewContext
        let rows = try context.fetch(PropertyFetchRequest<Book>(
            properties: [.value(\.title), .value(\.pages)],
            sortBy: [ResultSort("pages", order: .reverse), ResultSort("title")]))
        #expect(rows.map(\.names) == Array(repeating: ["title", "pages"], count: 6))
        #expect(try rows.map { try $0["title", as: String.self] } == ["Gödel", "Dune", "SPQR", "Emma", "Cosmos", "Ants"])
        #expect(try rows.map { try $0["pages", as: Int.self] } == [770, 600, 600, 400, 350, 120])
        #expect(rows[0].dictionary == ["title": .text("Gödel"), "pages": .integer(770)])

        var window = PropertyFetchRequest<Book>(properties: [.value(\.title, as: "name")], sortBy: [ResultSort("name")])
        window.fetchOffset = 1
        window.fetchLimit = 2
        #expect(try context.fetch(window).map { try $0["name", as: String.self] } == ["Cosmos", "Dune"])
    }

    @Test("Distinct values, ordered by every value when no sort is given", arguments: StoreKind.allCases)
    func distinct(kind: StoreKind) throws {
        let context = try library(kind).viewContext
        var request = PropertyFetchRequest<Book>(properties: [.value(\.genre)])
        request.returnsDistinctResults = true
        #expect(try context.fetch(request).map { try $0["genre", as: Genre.self] } == [.fiction, .history, .science])
        request.properties = [.value(\.pages)]
        #expect(try context.fetch(request).map { try $0["pages", as: Int.self] } == [120, 350, 400, 600, 770])
    }

    @Test("A to-one key path's attribute, NULL where the relationship is empty", arguments: StoreKind.allCases)
    func toOnePath(kind: StoreKind) throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let penguin = Publisher(name: "Penguin")
        let ann = Author(name: "Ann", rating: 4)
        context.insert(ann)
        ann.publisher = penguin
        context.insert(Novel(title: "B", pages: 10, author: ann))
        context.insert(Novel(title: "A", pages: 20))
        try context.save()
        let rows = try context.fetch(PropertyFetchRequest<Novel>(
            properties: [.value(\.title), .value(\.author?.name), .value(\.author?.publisher?.name, as: "publisher")],
            sortBy: [ResultSort("title")]))
        #expect(rows[0].names == ["title", "author.name", "publisher"])
        #expect(try rows.map { try $0["author.name", as: String?.self] } == [nil, "Ann"])
        #expect(try rows.map { try $0["publisher", as: String?.self] } == [nil, "Penguin"])
    }

    @Test("Count, sum, min, max and average over all objects; an empty entity gives 0 and nils", arguments: StoreKind.allCases)
    func aggregatesWithoutGrouping(kind: StoreKind) throws {
        let request = PropertyFetchRequest<Book>(properties: [
            .count(), .count(of: \.rating, as: "rated"), .sum(\.pages, as: "pages"), .min(\.pages, as: "shortest"),
            .max(\.title, as: "last"), .average(\.rating, as: "rating"), .sum(\.rating, as: "ratings"),
        ])
        let empty = try kind.makeContainer().viewContext
        let none = try #require(try empty.fetch(request).first)
        #expect(try none["count", as: Int.self] == 0)
        #expect(try none["rated", as: Int.self] == 0)
        #expect(try none["pages", as: Int?.self] == nil)
        #expect(try none["shortest", as: Int?.self] == nil)
        #expect(try none["last", as: String?.self] == nil)
        #expect(try none["rating", as: Double?.self] == nil)
        #expect(throws: LoomError.self) { try none["pages", as: Int.self] }   // NULL is not an Int

        let rows = try library(kind).viewContext.fetch(request)
        #expect(rows.count == 1)
        let all = rows[0]
        #expect(try all["count", as: Int.self] == 6)
        #expect(try all["rated", as: Int.self] == 5)
        #expect(all["pages"] == .integer(2840))                // a sum of integers is an integer
        #expect(try all["shortest", as: Int.self] == 120)
        #expect(try all["last", as: String.self] == "SPQR")
        #expect(try all["rating", as: Double.self] == 19.0 / 5) // NULLs ignored
        #expect(all["ratings"] == .real(19))                   // a sum of reals is real
    }

    @Test("Grouping by one and two keys, ordered by the groups or by an aggregate", arguments: StoreKind.allCases)
    func grouping(kind: StoreKind) throws {
        let context = try library(kind).viewContext
        var request = PropertyFetchRequest<Book>(
            properties: [.value(\.genre), .count(as: "books"), .sum(\.pages, as: "pages"), .max(\.rating, as: "best")],
            groupBy: [\.genre])
        var rows = try context.fetch(request)
        #expect(try rows.map { try $0["genre", as: Genre.self] } == [.fiction, .history, .science])
        #expect(try rows.map { try $0["books", as: Int.self] } == [2, 1, 3])
        #expect(try rows.map { try $0["pages", as: Int.self] } == [1000, 600, 1240])
        #expect(try rows.map { try $0["best", as: Double?.self] } == [4.5, 3.5, 5.0])

        request.sortBy = [ResultSort("books", order: .reverse)]
        rows = try context.fetch(request)
        #expect(try rows.map { try $0["genre", as: Genre.self] } == [.science, .fiction, .history])

        // Two keys; a group key need not be fetched.
        let two = PropertyFetchRequest<Book>(properties: [.value(\.genre), .value(\.pages), .count()], groupBy: [\.genre, \.pages, \.rating])
        #expect(try context.fetch(two).map { "\(try $0["genre", as: Genre.self]) \(try $0["pages", as: Int.self])" }
                == ["fiction 400", "fiction 600", "history 600", "science 120", "science 350", "science 770"])
        let byTwo = PropertyFetchRequest<Book>(properties: [.value(\.pages), .value(\.genre), .count()], groupBy: [\.pages, \.genre])
        #expect(try context.fetch(byTwo).map { try $0["pages", as: Int.self] } == [120, 350, 400, 600, 600, 770])
    }

    @Test("Grouping by an attribute of a related object", arguments: StoreKind.allCases)
    func groupingThroughToOne(kind: StoreKind) throws {
        let context = try kind.makeGraphContainer().viewContext
        let ann = Author(name: "Ann"), bob = Author(name: "Bob")
        for (i, author) in [ann, bob, ann, nil, ann].enumerated() {
            context.insert(Novel(title: "N\(i)", pages: 100 * (i + 1), author: author))
        }
        try context.save()
        let rows = try context.fetch(PropertyFetchRequest<Novel>(
            properties: [.value(\.author?.name, as: "author"), .count(as: "novels"), .average(\.pages, as: "pages")],
            groupBy: [\.author?.name]))
        #expect(try rows.map { try $0["author", as: String?.self] } == [nil, "Ann", "Bob"])
        #expect(try rows.map { try $0["novels", as: Int.self] } == [1, 3, 1])
        #expect(try rows.map { try $0["pages", as: Double.self] } == [400, 300, 200])
    }

    @Test("A predicate filters what is aggregated", arguments: StoreKind.allCases)
    func predicateAndAggregate(kind: StoreKind) throws {
        let context = try library(kind).viewContext
        let rows = try context.fetch(PropertyFetchRequest<Book>(
            predicate: #Predicate { $0.pages >= 400 && $0.title != "SPQR" },
            properties: [.count(), .sum(\.pages, as: "pages"), .min(\.title, as: "first")]))
        #expect(try rows[0]["count", as: Int.self] == 3)
        #expect(try rows[0]["pages", as: Int.self] == 1770)
        #expect(try rows[0]["first", as: String.self] == "Dune")
        let grouped = try context.fetch(PropertyFetchRequest<Book>(
            predicate: #Predicate { $0.rating != nil }, properties: [.value(\.genre), .count()], groupBy: [\.genre]))
        #expect(try grouped.map { try $0["count", as: Int.self] } == [2, 1, 2])
    }

    @Test("Unsaved inserts, changes and deletions are reflected; includesPendingChanges = false reads the store", arguments: StoreKind.allCases)
    func pendingChanges(kind: StoreKind) throws {
        let context = try library(kind).viewContext
        let all = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.title)]))
        let extra = Book(isbn: "isbn-new", title: "Zen", pages: 1000)
        extra.genre = .history
        context.insert(extra)                            // history: +1 book, +1000 pages
        all.first { $0.title == "Ants" }!.pages = 220     // science: +100 pages
        context.delete(all.first { $0.title == "Emma" }!) // fiction: -1 book, -400 pages
        all.first { $0.title == "Dune" }!.genre = .science // fiction -> science

        var request = PropertyFetchRequest<Book>(properties: [.value(\.genre), .count(as: "books"), .sum(\.pages, as: "pages")], groupBy: [\.genre])
        let pending = try context.fetch(request)
        #expect(try pending.map { try $0["genre", as: Genre.self] } == [.history, .science])
        #expect(try pending.map { try $0["books", as: Int.self] } == [2, 4])
        #expect(try pending.map { try $0["pages", as: Int.self] } == [1600, 1940])

        request.includesPendingChanges = false
        let stored = try context.fetch(request)
        #expect(try stored.map { try $0["books", as: Int.self] } == [2, 1, 3])
        #expect(try stored.map { try $0["pages", as: Int.self] } == [1000, 600, 1240])

        // Saved, the store gives what the context computed.
        try context.save()
        request.includesPendingChanges = true
        #expect(try context.fetch(request) == pending)
    }

    @Test("Unsaved changes to a related object are reflected in a to-one path", arguments: StoreKind.allCases)
    func pendingChangesThroughToOne(kind: StoreKind) throws {
        let context = try kind.makeGraphContainer().viewContext
        let ann = Author(name: "Ann")
        context.insert(Novel(title: "A", pages: 1, author: ann))
        context.insert(Novel(title: "B", pages: 2, author: Author(name: "Bob")))
        try context.save()
        ann.name = "Anna"
        let request = PropertyFetchRequest<Novel>(properties: [.value(\.author?.name, as: "author"), .sum(\.pages, as: "pages")], groupBy: [\.author?.name])
        #expect(try context.fetch(request).map { try $0["author", as: String.self] } == ["Anna", "Bob"])
    }

    @Test("A child context sees its parent's unsaved changes and its own")
    func childContext() async throws {
        let container = try library(.sqlite)
        let parent = container.viewContext
        parent.insert(Book(isbn: "p", title: "Parent", pages: 1))
        let child = parent.newChildContext()
        let counts = try await child.perform { child in
            child.insert(Book(isbn: "c", title: "Child", pages: 1))
            var request = PropertyFetchRequest<Book>(properties: [.count()])
            let with = try child.fetch(request)[0]["count", as: Int.self]
            request.includesPendingChanges = false
            return (with, try child.fetch(request)[0]["count", as: Int.self])
        }
        #expect(counts == (8, 7))
    }

    @Test("An integer sum that overflows is an error, in SQL and in memory", arguments: StoreKind.allCases)
    func overflow(kind: StoreKind) throws {
        let context = try kind.makeContainer().viewContext
        context.insert(Book(isbn: "1", title: "Big", pages: .max))
        context.insert(Book(isbn: "2", title: "One", pages: 1))
        let request = PropertyFetchRequest<Book>(properties: [.sum(\.pages, as: "pages"), .average(\.pages, as: "average")])
        let unsaved = try #require(throws: LoomError.self) { try context.fetch(request) }   // computed in memory
        #expect(unsaved.code == .integerOverflow)
        try context.save()
        let error = try #require(throws: LoomError.self) { try context.fetch(request) }
        #expect(error.code == .integerOverflow)
        #expect(error.attributeNames == ["pages"])
        // An average does not overflow: it is computed in floating point.
        let average = try context.fetch(PropertyFetchRequest<Book>(properties: [.average(\.pages, as: "average")]))
        #expect(try average[0]["average", as: Double.self] > 4e18)
    }

    @Test("Malformed requests are errors that say what is wrong", arguments: StoreKind.allCases)
    func errors(kind: StoreKind) throws {
        let context = try library(kind).viewContext
        func code(_ request: PropertyFetchRequest<Book>) -> LoomError.Code? {
            do { _ = try context.fetch(request); return nil } catch { return error.code }
        }
        let sumOfText = PropertyFetchRequest<Book>(properties: [.sum(\.title)])
        #expect(code(sumOfText) == .invalidRequest)
        let error = try #require(throws: LoomError.self) { try context.fetch(sumOfText) }
        #expect(error.message.contains("Book.title"))
        #expect(error.attributeNames == ["title"])
        #expect(code(PropertyFetchRequest<Book>(properties: [.average(\.published)])) == .invalidRequest)
        #expect(code(PropertyFetchRequest<Book>(properties: [.min(\.isbn), .max(\.genre)])) == nil)
        #expect(code(PropertyFetchRequest<Book>(properties: [.value(\.scratch)])) == .invalidRequest)      // transient
        #expect(code(PropertyFetchRequest<Book>(properties: [.value(\.title), .count()])) == .invalidRequest)   // not grouped
        #expect(code(PropertyFetchRequest<Book>(properties: [.value(\.title), .count()], groupBy: [\.genre])) == .invalidRequest)
        #expect(code(PropertyFetchRequest<Book>(properties: [])) == .invalidRequest)
        #expect(code(PropertyFetchRequest<Book>(properties: [.count(), .count(of: \.rating, as: "count")])) == .invalidRequest)
        #expect(code(PropertyFetchRequest<Book>(properties: [.count()], sortBy: [ResultSort("nope")])) == .unsupportedSort)
        #expect(code(PropertyFetchRequest<Book>(properties: [.count()], fetchLimit: -1)) == .invalidRequest)
        let rows = try context.fetch(PropertyFetchRequest<Book>(properties: [.count()]))
        #expect(throws: LoomError.self) { try rows[0]["missing", as: Int.self] }
        #expect(throws: LoomError.self) { try rows[0]["count", as: String.self] }
    }

    @Test("On SQLite a values fetch is one statement, with every value bound")
    func oneStatement() throws {
        let log = StatementLog()
        let context = try StoreKind.sqlite.makeGraphContainer(trace: log.hook).viewContext
        context.insert(Novel(title: "Secret title", pages: 10, author: Author(name: "Ann")))
        try context.save()
        log.reset()
        var request = PropertyFetchRequest<Novel>(
            predicate: #Predicate { $0.pages > 5 && $0.title != "Secret title" },
            properties: [.value(\.author?.name, as: "author"), .count(as: "novels"), .sum(\.pages, as: "pages")],
            groupBy: [\.author?.name], sortBy: [ResultSort("pages", order: .reverse)])
        request.fetchLimit = 10
        _ = try context.fetch(request)
        #expect(log.selects.count == 1)
        let sql = try #require(log.selects.first)
        #expect(sql.contains("GROUP BY") && sql.contains("ORDER BY 3 DESC") && sql.contains("LIMIT ? OFFSET ?"))
        #expect(!sql.contains("Secret") && !sql.contains("5"))
    }
}
