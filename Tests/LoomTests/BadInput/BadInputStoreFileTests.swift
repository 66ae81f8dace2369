import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import Testing

/// The bad-input catalogue (`Loom.docc/BadInput.md`): files that are not Loom stores or are
/// damaged, stores opened with another model, and malformed store locations. Each open or read
/// is refused with its code and a message naming the file; the file keeps every byte it had.
@Suite("Bad input: store files and models", .timeLimit(.minutes(5)))
struct BadInputStoreFileTests {
    /// A closed SQLite store of the fixture's objects, and its bytes.
    static func closedStore() async throws -> (URL, Data) {
        let url = TemporaryDirectory.make().appending(path: "damaged.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: BadInputFixture.schema))
        try await container.performBackgroundTask { context in
            for i in 0..<200 { context.insert(Book(isbn: "978-\(i)", title: String(repeating: "t", count: 200))) }
            try context.save()
        }
        try await container.close()
        return (url, try Data(contentsOf: url))
    }

    /// Opening `url` with the fixture's schema and reading every book must throw `code` naming
    /// the file, and leave its bytes as they were.
    func expectOpenRefused(_ url: URL, _ codes: Set<LoomError.Code>, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let bytes = try Data(contentsOf: url)
        let error = await #expect(throws: LoomError.self, sourceLocation: sourceLocation) {
            let container = PersistentContainer(store: try SQLiteStore(url: url, schema: BadInputFixture.schema))
            defer { Task { try? await container.close() } }
            _ = try await container.performBackgroundTask { context in try context.fetch(FetchRequest<Book>()).map(\.title) }
        }
        #expect(codes.contains(error?.code ?? .closed), "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.message.contains(url.path) == true, "\(String(describing: error)) does not name the file", sourceLocation: sourceLocation)
        #expect(try Data(contentsOf: url) == bytes, "the file changed", sourceLocation: sourceLocation)
    }

    @Test("A text file is notADatabase")
    func textFile() async throws {
        let url = TemporaryDirectory.make().appending(path: "notes.loom")
        try Data("Dear diary,\nnot a database.\n".utf8).write(to: url)
        try await expectOpenRefused(url, [.notADatabase])
    }

    @Test("A file with SQLite's header and nothing else is notADatabase")
    func headerOnly() async throws {
        let url = TemporaryDirectory.make().appending(path: "header.loom")
        try (Data("SQLite format 3\u{0}".utf8) + Data(repeating: 0xFF, count: 84)).write(to: url)
        try await expectOpenRefused(url, [.notADatabase])
    }

    @Test("A SQLite database Loom did not make is notALoomStore")
    func foreignDatabase() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.sqlite")
        try ForeignDatabase.create(at: url)
        try await expectOpenRefused(url, [.notALoomStore])
    }

    @Test("A store cut short is notADatabase")
    func truncatedStore() async throws {
        let (url, bytes) = try await Self.closedStore()
        try bytes.prefix(bytes.count / 2).write(to: url)
        try await expectOpenRefused(url, [.notADatabase])
    }

    @Test("A store with a page overwritten by garbage is notADatabase when read")
    func overwrittenPage() async throws {
        let (url, bytes) = try await Self.closedStore()
        var damaged = bytes
        let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
        // The last page holds books' rows: the store opens, and the read of them fails.
        let start = (bytes.count / pageSize - 1) * pageSize
        damaged.replaceSubrange(start..<(start + pageSize), with: Data(repeating: 0xA5, count: pageSize))
        try damaged.write(to: url)
        try await expectOpenRefused(url, [.notADatabase])
    }

    @Test("A folder given as the store's file is storeFailure, naming it")
    func folderAsStore() async throws {
        let url = TemporaryDirectory.make()
        let error = #expect(throws: LoomError.self) { _ = try SQLiteStore(url: url, schema: BadInputFixture.schema) }
        #expect(error?.code == .storeFailure || error?.code == .notADatabase, "\(String(describing: error))")
        #expect(error?.message.contains(url.path) == true, "\(String(describing: error))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: url.path).isEmpty)
    }

    /// The fixture's schema, but with `Book.title` an integer: a change no migration infers
    /// from saved text.
    static func schemaWithIntegerTitles() throws -> Schema {
        let book = EntityDescription(name: "Book", modelType: nil, properties: [
            .attribute(AttributeDescription(name: "isbn", type: .string, isOptional: false, isUnique: true)),
            .attribute(AttributeDescription(name: "title", type: .integer64, isOptional: false)),
            .attribute(AttributeDescription(name: "pages", type: .integer64, isOptional: false)),
            .attribute(AttributeDescription(name: "rating", type: .double, isOptional: true)),
            .attribute(AttributeDescription(name: "genre", type: .string, isOptional: false)),
            .attribute(AttributeDescription(name: "published", type: .date, isOptional: true)),
        ], uniquenessConstraints: [["isbn"]])
        return try Schema([book] + BadInputFixture.schema.entities.filter { $0.name != "Book" })
    }

    @Test("A store opened with a model whose attribute changed type is refused, naming it", arguments: StoreKind.persistentCases)
    func modelWithAChangedType(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.container.close()
        let before = try await fixture.contentsReopened()
        let schema = try Self.schemaWithIntegerTitles()
        let error = #expect(throws: LoomError.self) {
            switch kind {
            case .sqlite:
                _ = try SQLiteStore(url: try #require(fixture.sqliteURL), schema: schema)
            default:
                _ = try PostgreSQLStore(configuration: try #require(fixture.postgresConfiguration), schema: schema)
            }
        }
        #expect(error?.code == .schemaMismatch || error?.code == .migrationFailed, "\(String(describing: error))")
        #expect(error?.message.contains("title") == true, "\(String(describing: error))")
        #expect(try await fixture.contentsReopened() == before)
    }

    @Test("A model with a quote, a NUL or a reserved prefix in a name is invalidModel before any store is touched", arguments: [
        "Bo\"ok", "Bo\u{0}ok", "loom_books", "sqlite_books", "Z_BOOK", "",
    ])
    func hostileEntityName(name: String) throws {
        let entity = EntityDescription(name: name, modelType: nil, properties: [
            .attribute(AttributeDescription(name: "title", type: .string, isOptional: false)),
        ])
        let error = #expect(throws: LoomError.self) { _ = try Schema([entity]) }
        #expect(error?.code == .invalidModel, "\(String(describing: error))")
        #expect(error?.message.contains("entity") == true, "\(String(describing: error))")
    }

    @Test("An attribute named with a quote, a NUL, Z_ or nothing is invalidModel", arguments: ["ti\"tle", "ti\u{0}tle", "Z_PK", ""])
    func hostileAttributeName(name: String) throws {
        let entity = EntityDescription(name: "Book", modelType: nil, properties: [
            .attribute(AttributeDescription(name: name, type: .string, isOptional: false)),
        ])
        let error = #expect(throws: LoomError.self) { _ = try Schema([entity]) }
        #expect(error?.code == .invalidModel, "\(String(describing: error))")
        #expect(error?.message.contains("Book.") == true, "\(String(describing: error))")
    }

    @Test("Two entities of one name, or one attribute declared twice, are invalidModel")
    func duplicateNames() throws {
        let book = EntityDescription(name: "Book", modelType: nil, properties: [
            .attribute(AttributeDescription(name: "title", type: .string, isOptional: false)),
        ])
        let twice = #expect(throws: LoomError.self) { _ = try Schema([book, book]) }
        #expect(twice?.code == .invalidModel, "\(String(describing: twice))")
        let attribute = EntityDescription(name: "Book", modelType: nil, properties: [
            .attribute(AttributeDescription(name: "title", type: .string, isOptional: false)),
            .attribute(AttributeDescription(name: "Title", type: .string, isOptional: false)),
        ])
        let error = #expect(throws: LoomError.self) { _ = try Schema([attribute]) }
        #expect(error?.code == .invalidModel)
        #expect(error?.message.contains("declared twice") == true, "\(String(describing: error))")
    }

    @Test("A uniqueness constraint naming no attribute is invalidModel")
    func constraintOnUnknownAttribute() throws {
        let entity = EntityDescription(name: "Book", modelType: nil, properties: [
            .attribute(AttributeDescription(name: "title", type: .string, isOptional: false)),
        ], uniquenessConstraints: [["isbn"]])
        let error = #expect(throws: LoomError.self) { _ = try Schema([entity]) }
        #expect(error?.code == .invalidModel)
        #expect(error?.message.contains("'isbn'") == true, "\(String(describing: error))")
    }

    @Test("A very long entity name is stored and read back on every store", arguments: StoreKind.allCases)
    func veryLongEntityName(kind: StoreKind) async throws {
        let name = "Entity" + String(repeating: "x", count: 120)
        let schema = try Schema([EntityDescription(name: name, modelType: nil, properties: [
            .attribute(AttributeDescription(name: "title" + String(repeating: "y", count: 120), type: .string, isOptional: false)),
        ])])
        let store: any PersistentStore = switch kind {
        case .inMemory: InMemoryStore(schema: schema)
        case .sqlite: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "long.loom"), schema: schema)
        case .postgres: try PostgresServer.makeStore(schema)
        }
        let container = PersistentContainer(store: store)
        let longAttribute = "title" + String(repeating: "y", count: 120)
        let titles = try await container.performBackgroundTask { context in
            let entity = try #require(context.coordinator.schema.entities.first)
            let object = try DynamicObject(entity: entity, context: context)
            object[longAttribute] = .text("kept")
            try context.save()
            return try context.fetch(DynamicFetchRequest(entityName: name)).compactMap { ($0 as? DynamicObject)?[longAttribute] ?? nil }
        }
        #expect(titles == [.text("kept")])
        try await container.close()
    }

    @Test("A PostgreSQL location that is not a URL is invalidRequest, naming it")
    func malformedPostgreSQLURL() throws {
        let error = #expect(throws: LoomError.self) { _ = try PostgreSQLStore.Configuration(url: "postgres//nobody@") }
        #expect(error?.code == .invalidRequest, "\(String(describing: error))")
        #expect(error?.message.contains("postgres//nobody@") == true, "\(String(describing: error))")
    }
}
