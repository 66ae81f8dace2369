import Foundation
import Loom
import Testing

/// The bad-input catalogue (`Loom.docc/BadInput.md`): values a save or a batch request cannot
/// store, and hostile text. Each is refused with its code and a message naming the entity and
/// attribute, or stored exactly as given; the store holds nothing else than before.
@Suite("Bad input: values", .timeLimit(.minutes(5)))
struct BadInputValueTests {
    @Test("A required attribute left unset is missingRequiredValue, naming it", arguments: StoreKind.allCases)
    func requiredValueMissing(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.missingRequiredValue, mentioning: ["Book", "title"]) { context in
            let book = Book(context: context)
            book.isbn = "978-3"
            try context.save()
        }
    }

    @Test("A duplicate unique value is uniquenessViolation, naming the attribute", arguments: StoreKind.allCases)
    func duplicateUniqueValue(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let error = try await fixture.expectRefused(.uniquenessViolation) { context in
            context.insert(Book(isbn: "978-1", title: "Dune again"))
            try context.save()
        }
        #expect(error?.entityName == "Book")
        #expect(error?.attributeNames == ["isbn"])
    }

    @Test("A duplicate compound unique value is uniquenessViolation, naming both attributes", arguments: StoreKind.allCases)
    func duplicateCompoundUniqueValue(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let error = try await fixture.expectRefused(.uniquenessViolation) { context in
            context.insert(Shelf(room: "hall", position: 1))
            try context.save()
        }
        #expect(Set(error?.attributeNames ?? []) == ["room", "position"])
    }

    @Test("Two new objects with one unique value in one save are uniquenessViolation", arguments: StoreKind.allCases)
    func duplicateWithinOneSave(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.uniquenessViolation) { context in
            context.insert(Book(isbn: "978-7", title: "One"))
            context.insert(Book(isbn: "978-7", title: "Two"))
            try context.save()
        }
    }

    @Test("A batch insert repeating a unique value is uniquenessViolation, inserting none", arguments: StoreKind.allCases)
    func batchInsertDuplicate(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.uniquenessViolation) { context in
            _ = try context.execute(BatchInsertRequest<Book>(rows: [
                [.set(\Book.isbn, to: "978-8"), .set(\Book.title, to: "New")],
                [.set(\Book.isbn, to: "978-1"), .set(\Book.title, to: "Taken")],
            ]))
        }
    }

    @Test("A batch update that makes two unique values equal is uniquenessViolation, updating none", arguments: StoreKind.allCases)
    func batchUpdateDuplicate(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.uniquenessViolation) { context in
            _ = try context.execute(BatchUpdateRequest<Book>(set: [.set(\Book.isbn, to: "same")]))
        }
    }

    @Test("A batch insert leaving a required attribute unset is missingRequiredValue", arguments: StoreKind.allCases)
    func batchInsertMissingRequired(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.missingRequiredValue, mentioning: ["Book", "title"]) { context in
            _ = try context.execute(BatchInsertRequest<Book>(rows: [[.set(\Book.isbn, to: "978-8")]]))
        }
    }

    @Test("Infinite doubles and floats are stored and read back", arguments: StoreKind.allCases)
    func infinities(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.container.performBackgroundTask { context in
            let sample = Sample()
            sample.int = 98
            sample.double = -.infinity
            sample.float = .infinity
            context.insert(sample)
            try context.save()
        }
        let read = try await fixture.container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Sample>(predicate: #Predicate { $0.int == 98 })).map { [$0.double, Double($0.float)] }
        }
        #expect(read == [[-.infinity, .infinity]])
    }

    @Test("Int64's extremes are stored and compared exactly", arguments: StoreKind.allCases)
    func integerExtremes(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.container.performBackgroundTask { context in
            for value in [Int64.min, Int64.max] {
                let sample = Sample()
                sample.int64 = value
                sample.int = 97
                context.insert(sample)
            }
            try context.save()
        }
        let (highest, lowest) = (Int64.max, Int64.min)
        let read = try await fixture.container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Sample>(predicate: #Predicate { $0.int64 == highest || $0.int64 == lowest }, sortBy: [SortDescriptor(\Sample.int64)])).map(\.int64)
        }
        #expect(read == [.min, .max])
    }

    @Test("Text holding NUL: SQLite stores it whole, PostgreSQL refuses it naming the attribute", arguments: StoreKind.allCases)
    func textWithNUL(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        guard kind == .postgres else {
            try await fixture.container.performBackgroundTask { context in
                context.insert(Book(isbn: "nul", title: "a\u{0}b"))
                try context.save()
            }
            let titles = try await fixture.container.performBackgroundTask { context in
                try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "nul" })).map(\.title)
            }
            #expect(titles == ["a\u{0}b"])
            return
        }
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book.title", "NUL", "Nothing was saved"]) { context in
            context.insert(Book(isbn: "nul", title: "a\u{0}b"))
            try context.save()
        }
    }

    @Test("SQL in a value and in a predicate's constant is text, bound as a parameter", arguments: StoreKind.allCases)
    func sqlInValues(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let hostile = "x'); DROP TABLE \"Book\"; --"
        try await fixture.container.performBackgroundTask { context in
            context.insert(Book(isbn: hostile, title: "\" OR 1=1 --"))
            try context.save()
        }
        let found = try await fixture.container.performBackgroundTask { context in
            (try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == hostile })).map(\.title),
             try context.count(for: FetchRequest<Book>()))
        }
        #expect(found.0 == ["\" OR 1=1 --"])
        #expect(found.1 == 3)
    }

    @Test("A very long text value (4 MiB) is stored whole", arguments: StoreKind.allCases)
    func longText(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let long = String(repeating: "é", count: 2 << 20)
        try await fixture.container.performBackgroundTask { context in
            context.insert(Book(isbn: "long", title: long))
            try context.save()
        }
        let count = try await fixture.container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "long" })).map { $0.title.utf8.count }
        }
        #expect(count == [4 << 20])
    }

    @Test("A predicate with 40,000 constants in one `contains` is answered, not refused by SQLite's limit", arguments: StoreKind.allCases)
    func hugeInList(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let isbns = (0..<40_000).map { "978-\($0)" }
        let count = try await fixture.container.performBackgroundTask { context in
            try context.count(for: FetchRequest<Book>(predicate: #Predicate { isbns.contains($0.isbn) }))
        }
        #expect(count == 2)
    }

    /// Saves a ``DynamicObject`` book whose `name` holds `value`, which must be refused with
    /// typeMismatch naming `Book.name`.
    func expectWrongKindRefused(_ name: String, _ value: StoredValue, kind: StoreKind,
                                sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let error = try await fixture.expectRefused(.typeMismatch, mentioning: ["Book.\(name)"], sourceLocation: sourceLocation) { context in
            let entity = try #require(context.coordinator.schema.entities.first { $0.name == "Book" })
            let book = try DynamicObject(entity: entity, context: context)
            book["isbn"] = .text("978-0")
            book["title"] = .text("Untitled")
            book["pages"] = .integer(1)
            book["genre"] = .text("fiction")
            book[name] = value
            try context.save()
        }
        #expect(error?.attributeNames == [name], sourceLocation: sourceLocation)
    }

    @Test("An integer in a string attribute is typeMismatch, naming it", arguments: StoreKind.allCases)
    func integerInStringAttribute(kind: StoreKind) async throws {
        try await expectWrongKindRefused("title", .integer(5), kind: kind)
    }

    @Test("Text in an integer attribute is typeMismatch, naming it", arguments: StoreKind.allCases)
    func textInIntegerAttribute(kind: StoreKind) async throws {
        try await expectWrongKindRefused("pages", .text("many"), kind: kind)
    }

    @Test("A fraction in an integer attribute is typeMismatch, naming it", arguments: StoreKind.allCases)
    func fractionInIntegerAttribute(kind: StoreKind) async throws {
        try await expectWrongKindRefused("pages", .real(2.5), kind: kind)
    }

    @Test("Bytes in a date attribute is typeMismatch, naming it", arguments: StoreKind.allCases)
    func bytesInDateAttribute(kind: StoreKind) async throws {
        try await expectWrongKindRefused("published", .blob(Data([1, 2, 3])), kind: kind)
    }

    @Test("A Codable value holding NaN and infinity is stored and read back, not a trap in its setter", arguments: StoreKind.allCases)
    func codableHoldingNaN(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.container.performBackgroundTask { context in
            let sample = Sample()
            sample.int = 96
            sample.dimensions = Dimensions(width: .nan, height: -.infinity)
            context.insert(sample)
            try context.save()
        }
        let read = try await fixture.container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Sample>(predicate: #Predicate { $0.int == 96 })).map(\.dimensions)
        }
        #expect(read.count == 1 && read[0].width.isNaN && read[0].height == -.infinity, "\(read)")
    }

    @Test("A batch update with a Codable value holding infinity stores it", arguments: StoreKind.allCases)
    func batchCodableHoldingInfinity(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let result = try await fixture.container.performBackgroundTask { context in
            try context.execute(BatchUpdateRequest<Sample>(set: [.set(\Sample.dimensions, to: Dimensions(width: .infinity, height: 1))]))
        }
        #expect(result.updatedCount == 1)
        let read = try await fixture.container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Sample>()).map(\.dimensions)
        }
        #expect(read == [Dimensions(width: .infinity, height: 1)])
    }
}
