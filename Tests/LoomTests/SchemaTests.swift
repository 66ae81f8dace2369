import Foundation
import Loom
import Testing

@Suite("Schema")
struct SchemaTests {
    @Test("The version hash is stable and changes with the layout, not with indexes")
    func versionHash() throws {
        func entity(_ titleType: AttributeType, optional: Bool = false, indexed: Bool = false) -> EntityDescription {
            EntityDescription(name: "Book", modelType: nil, attributes: [
                AttributeDescription(name: "title", type: titleType, isOptional: optional, isIndexed: indexed),
                AttributeDescription(name: "pages", type: .integer64, isOptional: false),
            ])
        }
        let base = try Schema([entity(.string)]).versionHash
        // A constant: the hash must not depend on the run, the machine or hash seeds.
        #expect(base == "cd1597da31194cb8580a67877a82b501")
        #expect(try Schema([entity(.string)]).versionHash == base)
        #expect(try Schema([entity(.string, indexed: true)]).versionHash == base)
        #expect(try Schema([entity(.string, optional: true)]).versionHash != base)
        #expect(try Schema([entity(.integer64)]).versionHash != base)
        #expect(try Schema(Book.self).versionHash == Schema(Book.self).versionHash)
    }

    @Test("An invalid model is one error listing every problem")
    func invalidModel() throws {
        let twice = EntityDescription(name: "Book", modelType: nil, attributes: [
            AttributeDescription(name: "title", type: .string, isOptional: false),
            AttributeDescription(name: "title", type: .string, isOptional: false),
        ], uniquenessConstraints: [["missing"]])
        let reserved = EntityDescription(name: "loom_metadata", modelType: nil, attributes: [])
        let error = try #require(throws: LoomError.self) { try Schema([twice, reserved, twice]) }
        #expect(error.code == .invalidModel)
        #expect(error.message.contains("Book.title is declared twice"))
        #expect(error.message.contains("'missing'"))
        #expect(error.message.contains("loom_metadata"))
        #expect(error.message.contains("entity Book is declared twice"))
    }

    @Test("A type Loom cannot store is reported when the schema is built")
    func unsupportedType() throws {
        struct Opaque {}
        let entity = EntityDescription(name: "Thing", modelType: nil, attributes: [
            AttributeDescription(name: "value", valueType: Opaque.self),
        ])
        let error = try #require(throws: LoomError.self) { try Schema([entity]) }
        #expect(error.code == .invalidModel)
        #expect(error.message.contains("Thing.value"))
        #expect(error.message.contains("Codable"))
    }

    @Test("@Model records uniqueness constraints and indexes")
    func modelConstraints() {
        #expect(Book.entity.uniquenessConstraints == [["isbn"]])
        #expect(Shelf.entity.uniquenessConstraints == [["room", "position"]])
        #expect(Shelf.entity.indexes == [["label"]])
        #expect(Book.entity.attributes.map(\.name) == ["isbn", "title", "pages", "rating", "genre", "published"])
    }

    @Test("The saved schema record round-trips through JSON")
    func recordCoding() throws {
        let schema = try Schema(Book.self, Shelf.self, Sample.self)
        let data = try JSONEncoder().encode(schema.record)
        let back = try JSONDecoder().decode(SchemaRecord.self, from: data)
        #expect(back == schema.record)
        #expect(try Schema(record: back).versionHash == schema.versionHash)
    }
}

@MainActor
@Suite("Faulting")
struct FaultingTests {
    @Test("Fetched objects are faults filled from the shared row cache on first use", arguments: StoreKind.allCases)
    func fetchedFaults(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        try container.newBackgroundContext().performAndWait { context in
            for i in 0..<3 { context.insert(Book(isbn: "\(i)", title: "B\(i)", pages: i)) }
            try context.save()
        }
        let context = container.viewContext
        let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.pages)]))
        #expect(books.allSatisfy { $0.isFault })
        #expect(books[1].title == "B1")
        #expect(!books[1].isFault)
        #expect(books[0].isFault)

        var eager = FetchRequest<Book>()
        eager.returnsObjectsAsFaults = false
        let other = container.newBackgroundContext()
        let faults = try other.performAndWait { context in try context.fetch(eager).map(\.isFault) }
        #expect(faults == [false, false, false])
    }

    @Test("A fetch returns the same instance for an object already registered", arguments: StoreKind.allCases)
    func uniquing(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Once")
        context.insert(book)
        try context.save()
        book.title = "Edited, unsaved"
        var storeOnly = FetchRequest<Book>()
        storeOnly.includesPendingChanges = false
        let fetched = try context.fetch(storeOnly)
        #expect(fetched.first === book)
        #expect(book.title == "Edited, unsaved")   // a fetch never overwrites unsaved edits
    }
}
