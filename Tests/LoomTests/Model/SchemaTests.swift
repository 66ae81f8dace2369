import Foundation
import Loom
@_spi(LoomStore) import LoomCore
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

@Suite("Schema relationships")
struct SchemaRelationshipTests {
    @Test("@Model describes relationships: kind, destination, inverse, delete rule")
    func described() throws {
        let schema = try Schema(StoreKind.graphTypes)
        let author = try #require(schema.entity(named: "Author"))
        #expect(author.attributes.map(\.name) == ["name", "rating", "born"])
        #expect(author.relationships.map(\.name) == ["publisher", "novels", "profile", "mentor", "students"])
        let novels = try #require(author.relationship(named: "novels"))
        #expect(novels.kind == .toMany && novels.deleteRule == .cascade && novels.destinationEntityName == "Novel" && novels.inverseName == "author")
        let resolved = schema.relationships(of: author)
        #expect(resolved[1].inverse.name == "author")
        #expect(resolved[4].inverse.name == "mentor")          // inferred from Author.mentor's side
        let novel = try #require(schema.entity(named: "Novel"))
        #expect(novel.relationship(named: "chapters")?.kind == .orderedToMany)
        #expect(novel.relationship(named: "author")?.kind == .toOne)
        #expect(novel.uniquenessConstraints == [["title", "author"]])
        #expect(schema.joinTables.map(\.name) == ["Z_Novel_tags"])
        let review = try #require(schema.entity(named: "Review"))
        #expect(review.relationship(named: "novel")?.isOptional == false)
    }

    @Test("A relationship to an entity outside the model is refused, naming both")
    func unknownDestination() throws {
        let error = try #require(throws: LoomError.self) { try Schema(Novel.self, Tag.self, Chapter.self, Review.self) }
        #expect(error.code == .invalidModel)
        #expect(error.message.contains("Novel.author leads to entity Author, which is not in this model"))
    }

    @Test("A relationship without an inverse, or with one that disagrees, is refused")
    func inverses() throws {
        func entity(_ name: String, _ relationships: [RelationshipDescription]) -> EntityDescription {
            EntityDescription(name: name, modelType: nil, attributes: [], relationships: relationships)
        }
        let lonely = try #require(throws: LoomError.self) {
            try Schema([
                entity("A", [RelationshipDescription(name: "b", destination: "B", kind: .toOne, inverse: nil)]),
                entity("B", [RelationshipDescription(name: "a", destination: "A", kind: .toMany, inverse: nil)]),
            ])
        }
        #expect(lonely.message.contains("A.b has no inverse"))
        #expect(lonely.message.contains("@Relationship(inverse:"))

        let disagree = try #require(throws: LoomError.self) {
            try Schema([
                entity("A", [RelationshipDescription(name: "b", destination: "B", kind: .toOne, inverse: "a"),
                             RelationshipDescription(name: "c", destination: "B", kind: .toOne, inverse: "a")]),
                entity("B", [RelationshipDescription(name: "a", destination: "A", kind: .toMany, inverse: "b")]),
            ])
        }
        #expect(disagree.message.contains("A.c names B.a as its inverse, but that one names A.b"))

        let missing = try #require(throws: LoomError.self) {
            try Schema([
                entity("A", [RelationshipDescription(name: "b", destination: "B", kind: .toOne, inverse: "nope")]),
                entity("B", []),
            ])
        }
        #expect(missing.message.contains("A.b names 'nope' as its inverse, which is not a relationship of B"))

        let symmetric = try #require(throws: LoomError.self) {
            try Schema([entity("P", [RelationshipDescription(name: "friends", destination: "P", kind: .toMany, inverse: "friends")])])
        }
        #expect(symmetric.message.contains("P.friends is its own inverse"))

        let constrained = try #require(throws: LoomError.self) {
            try Schema([
                EntityDescription(name: "A", modelType: nil, attributes: [], relationships: [
                    RelationshipDescription(name: "bs", destination: "B", kind: .toMany, inverse: "a"),
                ], uniquenessConstraints: [["bs"]]),
                entity("B", [RelationshipDescription(name: "a", destination: "A", kind: .toOne, inverse: nil)]),
            ])
        }
        #expect(constrained.message.contains("names 'bs', a to-many relationship"))
    }

    @Test("Relationships are part of the version hash and of the saved record")
    func hashAndRecord() throws {
        let schema = try Schema(StoreKind.graphTypes)
        let record = try JSONDecoder().decode(SchemaRecord.self, from: JSONEncoder().encode(schema.record))
        #expect(record == schema.record)
        let rebuilt = try Schema(record: record)
        #expect(rebuilt.versionHash == schema.versionHash)
        #expect(rebuilt.entity(named: "Author")?.relationship(named: "novels")?.deleteRule == .cascade)
        #expect(rebuilt.entity(named: "Novel")?.relationship(named: "chapters")?.kind == .orderedToMany)

        func pair(_ kind: RelationshipDescription.Kind) throws -> String {
            try Schema([
                EntityDescription(name: "A", modelType: nil, attributes: [], relationships: [RelationshipDescription(name: "b", destination: "B", kind: .toOne, inverse: "a")]),
                EntityDescription(name: "B", modelType: nil, attributes: [], relationships: [RelationshipDescription(name: "a", destination: "A", kind: kind, inverse: nil)]),
            ]).versionHash
        }
        #expect(try pair(.toMany) != pair(.orderedToMany))
    }

    @Test("A store made with relationships opens without its model, foreign keys readable by name")
    func dynamicObjects() async throws {
        let url = TemporaryDirectory.make().appending(path: "graph.loom")
        let schema = try Schema(StoreKind.graphTypes)
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        let annID = try await container.performBackgroundTask { context in
            let ann = Author(name: "Ann")
            context.insert(Novel(title: "N", author: ann))
            try context.save()
            return ann.objectID
        }
        try await container.close()
        let saved = try SQLiteStore.savedSchema(at: url)
        let reopened = PersistentContainer(store: try SQLiteStore(url: url, schema: saved))
        let author = try await reopened.performBackgroundTask { context in
            (try context.fetch(DynamicFetchRequest(entityName: "Novel")).first as? DynamicObject)?["author"]
        }
        #expect(author == .integer(annID.primaryKey))
    }
}

@MainActor
@Suite("Malformed requests")
struct MalformedRequestTests {
    @Test("A negative limit or offset is an error, on every store", arguments: StoreKind.allCases)
    func negativeWindow(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let limit = try #require(throws: LoomError.self) { try context.fetch(FetchRequest<Book>(fetchLimit: -1)) }
        #expect(limit.code == .invalidRequest)
        let offset = try #require(throws: LoomError.self) { try context.count(for: FetchRequest<Book>(fetchOffset: -5)) }
        #expect(offset.code == .invalidRequest)
        let dynamic = try #require(throws: LoomError.self) { try context.fetch(DynamicFetchRequest(entityName: "Book", fetchLimit: -1)) }
        #expect(dynamic.code == .invalidRequest)
    }
}
