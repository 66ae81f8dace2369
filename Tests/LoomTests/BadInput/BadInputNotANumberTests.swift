import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomTools
import Testing

/// NaN in a `Double` or `Float` attribute (`Loom.docc/BadInput.md`). SQLite has no NaN: it
/// binds one as NULL, so a SQLite store refuses it with ``LoomError/Code/unsupportedValue``
/// naming the entity, the attribute and the object, and writes nothing, whichever way the value
/// comes (a save, a batch insert or update, an import, `loom load`). The in-memory and
/// PostgreSQL stores hold NaN as it is and read it back.
@Suite("Bad input: NaN", .timeLimit(.minutes(5)))
struct BadInputNotANumberTests {
    /// Checks a refusal of a NaN in `entity.attribute`: its code, its message and the object it
    /// names.
    static func expectNaNRefusal(_ error: LoomError?, _ entity: String, _ attribute: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(error?.code == .unsupportedValue, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.message.contains("\(entity).\(attribute) is NaN") == true, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.message.contains("SQLite") == true, sourceLocation: sourceLocation)
        #expect(error?.entityName == entity, sourceLocation: sourceLocation)
        #expect(error?.attributeNames == [attribute], sourceLocation: sourceLocation)
        #expect(error?.objectID?.entityName == entity, sourceLocation: sourceLocation)
    }

    @Test("A NaN in a required double is refused on SQLite, kept elsewhere; the context saves again", arguments: StoreKind.allCases)
    func requiredDouble(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let before = try await fixture.contents()
        let (refusal, retried): (LoomError?, Bool) = try await fixture.container.performBackgroundTask { context in
            let sample = Sample()
            sample.int = 99
            sample.double = .nan
            context.insert(sample)
            do {
                try context.save()
                return (nil, false)
            } catch let error as LoomError {
                // The context is not poisoned: with a number instead, the same save goes through.
                sample.double = 1.5
                try context.save()
                return (error, true)
            }
        }
        let read = try await fixture.container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Sample>(predicate: #Predicate { $0.int == 99 })).map(\.double)
        }
        if kind == .sqlite {
            Self.expectNaNRefusal(refusal, "Sample", "double")
            #expect(refusal?.objectID?.storeIdentifier == fixture.container.coordinator.storeIdentifier)
            #expect(retried)
            #expect(read == [1.5])
            #expect(try await fixture.contents().filter { !$0.contains(" 99 ") && !$0.hasPrefix("history") } == before.filter { !$0.hasPrefix("history") })
        } else {
            #expect(refusal == nil, "\(String(describing: refusal))")
            #expect(read.count == 1 && read[0].isNaN, "\(read)")
        }
    }

    @Test("A NaN in an optional double is refused on SQLite (not read back as nil), kept elsewhere", arguments: StoreKind.allCases)
    func optionalDouble(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        guard kind == .sqlite else {
            try await fixture.container.performBackgroundTask { context in
                let book = Book(isbn: "nan", title: "Unrated")
                book.rating = .nan
                context.insert(book)
                try context.save()
            }
            let rating = try await fixture.container.performBackgroundTask { context in
                try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "nan" })).first?.rating
            }
            #expect(rating?.isNaN == true, "\(String(describing: rating))")
            return
        }
        let error = try await fixture.expectRefused(.unsupportedValue) { context in
            let book = Book(isbn: "nan", title: "Unrated")
            book.rating = .nan
            context.insert(book)
            try context.save()
        }
        Self.expectNaNRefusal(error, "Book", "rating")
    }

    @Test("A NaN in a float is refused on SQLite, kept elsewhere", arguments: StoreKind.allCases)
    func float(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        guard kind == .sqlite else {
            try await fixture.container.performBackgroundTask { context in
                let sample = Sample()
                sample.int = 95
                sample.float = .nan
                context.insert(sample)
                try context.save()
            }
            let read = try await fixture.container.performBackgroundTask { context in
                try context.fetch(FetchRequest<Sample>(predicate: #Predicate { $0.int == 95 })).map(\.float)
            }
            #expect(read.count == 1 && read[0].isNaN, "\(read)")
            return
        }
        let error = try await fixture.expectRefused(.unsupportedValue) { context in
            let sample = Sample()
            sample.float = .nan
            context.insert(sample)
            try context.save()
        }
        Self.expectNaNRefusal(error, "Sample", "float")
    }

    @Test("A saved object updated to NaN is refused on SQLite, its row unchanged")
    func updateToNaN() async throws {
        let fixture = try await BadInputFixture.make(.sqlite)
        let error = try await fixture.expectRefused(.unsupportedValue) { context in
            let book = try #require(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "978-2" })).first)
            book.pages = 321
            book.rating = .nan
            try context.save()
        }
        Self.expectNaNRefusal(error, "Book", "rating")
    }

    @Test("A batch insert with a NaN in its second row is refused on SQLite, inserting none", arguments: StoreKind.allCases)
    func batchInsert(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let rows: [[BatchValue<Book>]] = [
            [.set(\Book.isbn, to: "978-8"), .set(\Book.title, to: "Rated"), .set(\Book.rating, to: 4.0)],
            [.set(\Book.isbn, to: "978-9"), .set(\Book.title, to: "Unrated"), .set(\Book.rating, to: Double.nan)],
        ]
        guard kind == .sqlite else {
            let result = try await fixture.container.performBackgroundTask { context in try context.execute(BatchInsertRequest<Book>(rows: rows)) }
            #expect(result.insertedCount == 2)
            return
        }
        let error = try await fixture.expectRefused(.unsupportedValue) { context in
            _ = try context.execute(BatchInsertRequest<Book>(rows: rows))
        }
        Self.expectNaNRefusal(error, "Book", "rating")
    }

    @Test("A batch update setting NaN is refused on SQLite, updating none", arguments: StoreKind.allCases)
    func batchUpdate(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        guard kind == .sqlite else {
            let result = try await fixture.container.performBackgroundTask { context in
                try context.execute(BatchUpdateRequest<Book>(set: [.set(\Book.rating, to: Double.nan)]))
            }
            #expect(result.updatedCount == 2)
            return
        }
        let error = try await fixture.expectRefused(.unsupportedValue) { context in
            _ = try context.execute(BatchUpdateRequest<Book>(set: [.set(\Book.rating, to: Double.nan)]))
        }
        Self.expectNaNRefusal(error, "Book", "rating")
    }

    @Test("An import whose source holds NaN is refused on SQLite, its chunk not written", arguments: StoreKind.allCases)
    func importRequest(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let request = ImportRequest<Book, Double>([3.5, .nan]) { rating in
            [.set(\.isbn, to: "import-\(rating)"), .set(\.title, to: "Imported"), .set(\.rating, to: rating)]
        }
        guard kind == .sqlite else {
            let progress = try await fixture.container.performBackgroundTask { context in try context.execute(request) }
            #expect(progress.inserted == 2)
            return
        }
        let error = try await fixture.expectRefused(.unsupportedValue) { context in
            _ = try context.execute(request)
        }
        Self.expectNaNRefusal(error, "Book", "rating")
    }

    @Test("loom load of a dump holding NaN into a SQLite store is badInput naming the line and attribute, leaving no store")
    func loadIntoSQLite() async throws {
        // A dump as `loom dump` writes a PostgreSQL store holding a NaN: a SQLite store's dump,
        // its rating edited to the dump format's NaN.
        let folder = TemporaryDirectory.make()
        let source = folder.appending(path: "source.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: source, schema: try Schema([Book.self])))
        try await container.performBackgroundTask { context in
            let rated = Book(isbn: "1", title: "Rated")
            rated.rating = 1
            context.insert(rated)
            let unrated = Book(isbn: "2", title: "Unrated")
            unrated.rating = 2.5
            context.insert(unrated)
            try context.save()
        }
        try await container.close()
        let dumpURL = folder.appending(path: "nan.ndjson")
        _ = FileManager.default.createFile(atPath: dumpURL.path, contents: nil)
        let output = try FileHandle(forWritingTo: dumpURL)
        _ = try LoomTools.dump(storeAt: source, to: output.fileDescriptor)
        try output.close()
        var lines = try String(contentsOf: dumpURL, encoding: .utf8).components(separatedBy: "\n")
        let line = try #require(lines.firstIndex { $0.contains(#""rating":2.5"#) })
        lines[line] = lines[line].replacingOccurrences(of: #""rating":2.5"#, with: #""rating":{"real":"nan"}"#)
        try Data(lines.joined(separator: "\n").utf8).write(to: dumpURL)

        let input = try FileHandle(forReadingFrom: dumpURL)
        defer { try? input.close() }
        let url = folder.appending(path: "loaded.loom")
        let error = #expect(throws: LoomToolError.self) {
            try LoomTools.load(from: input.fileDescriptor, into: url)
        }
        #expect(error?.code == .badInput, "\(String(describing: error))")
        #expect(error?.message.contains("Book.rating is NaN") == true, "\(String(describing: error))")
        #expect(error?.line == line + 1)
        #expect(error?.field == "attributes.rating")
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }
}
