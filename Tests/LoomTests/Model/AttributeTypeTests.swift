import Foundation
import Loom
import Testing

@MainActor
@Suite("Attribute types")
struct AttributeTypeTests {
    @Test("Every attribute type round-trips exactly", arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let sample = Sample()
        sample.flag = true
        sample.int = .max
        sample.int16 = .min
        sample.int32 = .max
        sample.int64 = .min
        sample.double = -0.1 + 1e-300
        sample.float = 3.25
        sample.string = "quote ' \" % _ \\0, émoji 🧵, and a long tail " + String(repeating: "x", count: 100_000)
        sample.date = Date(timeIntervalSinceReferenceDate: -63_000_000_000.5)
        sample.data = Data([0, 255, 0xC3, 0x28, 0, 1])   // invalid UTF-8 on purpose
        sample.uuid = UUID()
        sample.url = URL(string: "https://example.com/a%20b?q=1#frag")!
        sample.decimal = Decimal(string: "12345678901234567890.123456789")!
        sample.genre = .history
        sample.priority = .high
        sample.dimensions = Dimensions(width: 1.5, height: 2)
        sample.optionalString = nil
        sample.optionalInt = 0
        sample.optionalDate = Date(timeIntervalSince1970: 4_102_444_800)
        sample.optionalData = Data()
        sample.optionalUUID = nil
        sample.optionalGenre = .science
        sample.optionalDimensions = nil
        context.insert(sample)
        try context.save()
        let id = sample.objectID

        let expected = (sample.flag, sample.int, sample.int16, sample.int32, sample.int64, sample.double, sample.float, sample.string)
        let copy = try container.newBackgroundContext().performAndWait { context in
            let s = try context.existingObject(with: id)
            return Snapshot(s)
        }
        #expect(copy.flag == expected.0)
        #expect(copy.int == expected.1)
        #expect(copy.int16 == expected.2)
        #expect(copy.int32 == expected.3)
        #expect(copy.int64 == expected.4)
        #expect(copy.double == expected.5)
        #expect(copy.float == expected.6)
        #expect(copy.string == expected.7)
        #expect(copy.string.utf8.elementsEqual(sample.string.utf8))
        #expect(copy.date == sample.date)
        #expect(copy.data == sample.data)
        #expect(copy.uuid == sample.uuid)
        #expect(copy.url == sample.url)
        #expect(copy.decimal == sample.decimal)
        #expect(copy.genre == .history)
        #expect(copy.priority == .high)
        #expect(copy.dimensions == Dimensions(width: 1.5, height: 2))
        #expect(copy.optionalString == nil)
        #expect(copy.optionalInt == 0)
        #expect(copy.optionalDate == sample.optionalDate)
        #expect(copy.optionalData == Data())
        #expect(copy.optionalUUID == nil)
        #expect(copy.optionalGenre == .science)
        #expect(copy.optionalDimensions == nil)
    }

    @Test("Hostile strings are bound, never spliced into SQL", arguments: StoreKind.allCases)
    func hostileStrings(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let nasty = ["'; DROP TABLE \"Book\"; --", "100%", "a_b", "\\0", "\"", String(repeating: "🧵", count: 10_000), "e\u{301}"]
        for (i, text) in nasty.enumerated() { context.insert(Book(isbn: text, title: "t\(i)")) }
        try context.save()
        for text in nasty {
            let found = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == text }))
            #expect(found.count == 1)
            #expect(found.first?.isbn == text)
        }
        // `%` and `_` are not wildcards.
        let percent = "%"
        #expect(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn.contains(percent) })).map(\.isbn) == ["100%"])
        let underscore = "_"
        #expect(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn.contains(underscore) })).map(\.isbn) == ["a_b"])
        #expect(try context.count(for: FetchRequest<Book>()) == nasty.count)
    }

    // Not PostgreSQL, whose text cannot hold NUL (PostgreSQLStoreTests checks the error).
    @Test("Strings with NUL characters round-trip exactly, compare whole and stay unique", arguments: [StoreKind.inMemory, .sqlite])
    func nulCharacters(kind: StoreKind) async throws {
        let directory = TemporaryDirectory.make()
        let url = directory.appending(path: "nul.loom")
        let schema = try Schema([Book.self, Shelf.self, Sample.self, Tally.self])
        let store: any PersistentStore = kind == .sqlite ? try SQLiteStore(url: url, schema: schema) : InMemoryStore(schema: schema)
        let container = PersistentContainer(store: store)
        let context = container.viewContext
        // "a\0b" and "a\0c" would both be "a" if anything read them as C strings, and collide
        // on the unique isbn.
        let isbns = ["a", "a\0b", "a\0c", "\0", "\0\0", "x\0", "ab"]
        for isbn in isbns { context.insert(Book(isbn: isbn, title: "t" + isbn + "\0end")) }
        try context.save()

        func check(_ context: ManagedObjectContext) throws {
            let all = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]))
            // Byte order: "\0" < "\0\0" < "a" < "a\0b" < "a\0c" < "ab" < "x\0".
            #expect(all.map(\.isbn) == ["\0", "\0\0", "a", "a\0b", "a\0c", "ab", "x\0"])
            #expect(all.allSatisfy { $0.title == "t" + $0.isbn + "\0end" })
            let wanted = "a\0b"
            #expect(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == wanted })).map(\.isbn) == ["a\0b"])
            let nul = "\0"
            let containing = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn.contains(nul) }, sortBy: [SortDescriptor(\.isbn)]))
            #expect(containing.map(\.isbn) == ["\0", "\0\0", "a\0b", "a\0c", "x\0"])
            let prefix = "a\0"
            #expect(try context.count(for: FetchRequest<Book>(predicate: #Predicate { $0.isbn.starts(with: prefix) })) == 2)
            #expect(try context.count(for: FetchRequest<Book>(predicate: #Predicate { $0.isbn.count == 3 })) == 2)
        }
        try check(context)
        // A duplicate that differs only after the NUL is no duplicate; one that is equal is.
        context.insert(Book(isbn: "a\0d", title: "new"))
        try context.save()
        let twin = Book(isbn: "x\0", title: "twin")
        context.insert(twin)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .uniquenessViolation)
        context.delete(twin)
        try context.save()
        let added = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.title == "new" }))
        context.delete(try #require(added.first))
        try context.save()

        // From the file itself, in a new container: nothing was cut at the NUL on disk.
        if kind == .sqlite {
            try await container.close()
            let reopened = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
            try check(reopened.viewContext)
        }
    }

    @Test("Attribute types recorded in the schema")
    func schemaTypes() throws {
        let entity = Sample.entity
        #expect(entity.attribute(named: "flag")?.type == .bool)
        #expect(entity.attribute(named: "int16")?.type == .integer16)
        #expect(entity.attribute(named: "genre")?.type == .string)
        #expect(entity.attribute(named: "priority")?.type == .integer64)
        #expect(entity.attribute(named: "dimensions")?.type == .codable)
        #expect(entity.attribute(named: "uuid")?.type == .uuid)
        #expect(entity.attribute(named: "optionalGenre")?.isOptional == true)
        #expect(entity.attribute(named: "genre")?.isOptional == false)
    }
}

/// The values of a Sample, as a Sendable copy.
struct Snapshot: Sendable {
    var flag: Bool, int: Int, int16: Int16, int32: Int32, int64: Int64, double: Double, float: Float
    var string: String, date: Date, data: Data, uuid: UUID, url: URL, decimal: Decimal
    var genre: Genre, priority: Priority, dimensions: Dimensions
    var optionalString: String?, optionalInt: Int?, optionalDate: Date?, optionalData: Data?
    var optionalUUID: UUID?, optionalGenre: Genre?, optionalDimensions: Dimensions?

    init(_ s: Sample) {
        flag = s.flag; int = s.int; int16 = s.int16; int32 = s.int32; int64 = s.int64; double = s.double; float = s.float
        string = s.string; date = s.date; data = s.data; uuid = s.uuid; url = s.url; decimal = s.decimal
        genre = s.genre; priority = s.priority; dimensions = s.dimensions
        optionalString = s.optionalString; optionalInt = s.optionalInt; optionalDate = s.optionalDate
        optionalData = s.optionalData; optionalUUID = s.optionalUUID; optionalGenre = s.optionalGenre
        optionalDimensions = s.optionalDimensions
    }
}
