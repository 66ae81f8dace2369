import Foundation
import Loom
import Testing

/// The bad-input catalogue (`Loom.docc/BadInput.md`): malformed fetch, values and history
/// requests. Each is refused with its code and a message naming the entity or property, and the
/// store holds what it held before.
@Suite("Bad input: requests", .timeLimit(.minutes(5)))
struct BadInputRequestTests {
    @Test("A negative fetchLimit is invalidRequest", arguments: StoreKind.allCases)
    func negativeFetchLimit(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "fetchLimit"]) { context in
            _ = try context.fetch(FetchRequest<Book>(fetchLimit: -1))
        }
    }

    @Test("A negative fetchOffset is invalidRequest", arguments: StoreKind.allCases)
    func negativeFetchOffset(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "fetchOffset"]) { context in
            _ = try context.fetch(FetchRequest<Book>(fetchOffset: -5))
        }
    }

    @Test("A negative fetchLimit in a count is invalidRequest", arguments: StoreKind.allCases)
    func negativeCountLimit(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book"]) { context in
            _ = try context.count(for: FetchRequest<Book>(fetchLimit: -1))
        }
    }

    @Test("Prefetching a key path that is not a relationship is unsupportedPredicate", arguments: StoreKind.allCases)
    func prefetchingAnAttribute(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.unsupportedPredicate, mentioning: ["prefetch", "Book"]) { context in
            var request = FetchRequest<Book>()
            request.relationshipKeyPathsForPrefetching = [\Book.title]
            _ = try context.fetch(request)
        }
    }

    @Test("Sorting by a transient property is unsupportedSort, naming the stored ones", arguments: StoreKind.allCases)
    func sortByTransient(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.unsupportedSort, mentioning: ["Book", "isbn"]) { context in
            _ = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\Book.scratch)]))
        }
    }

    @Test("A predicate on a transient property is unsupportedPredicate", arguments: StoreKind.allCases)
    func predicateOnTransient(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.unsupportedPredicate, mentioning: ["Book"]) { context in
            _ = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.scratch == 1 }, fetchLimit: nil))
        }
    }

    @Test("A values fetch naming no properties is invalidRequest", arguments: StoreKind.allCases)
    func valuesFetchWithoutProperties(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "no properties"]) { context in
            _ = try context.fetch(PropertyFetchRequest<Book>(properties: []))
        }
    }

    @Test("A values fetch with two results of one name is invalidRequest", arguments: StoreKind.allCases)
    func valuesFetchDuplicateNames(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "\"n\""]) { context in
            _ = try context.fetch(PropertyFetchRequest<Book>(properties: [.value(\Book.title, as: "n"), .value(\Book.isbn, as: "n")]))
        }
    }

    @Test("A values fetch of a transient property is invalidRequest", arguments: StoreKind.allCases)
    func valuesFetchOfTransient(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "stored attribute"]) { context in
            _ = try context.fetch(PropertyFetchRequest<Book>(properties: [.value(\Book.scratch)]))
        }
    }

    @Test("Summing a string attribute is invalidRequest", arguments: StoreKind.allCases)
    func sumOfText(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book.title"]) { context in
            _ = try context.fetch(PropertyFetchRequest<Book>(properties: [.sum(\Book.title)]))
        }
    }

    @Test("Sorting a values fetch by a name that is not a result is unsupportedSort", arguments: StoreKind.allCases)
    func valuesSortByUnknownName(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.unsupportedSort, mentioning: ["Book", "\"nope\""]) { context in
            _ = try context.fetch(PropertyFetchRequest<Book>(properties: [.value(\Book.title)], sortBy: [ResultSort("nope")]))
        }
    }

    @Test("A values fetch that groups but fetches an ungrouped value is invalidRequest", arguments: StoreKind.allCases)
    func valuesUngroupedColumn(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "group"]) { context in
            _ = try context.fetch(PropertyFetchRequest<Book>(properties: [.value(\Book.title), .count()], groupBy: [\Book.genre]))
        }
    }

    @Test("Reading a result by a name it does not have is invalidRequest", arguments: StoreKind.allCases)
    func resultByUnknownName(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["\"pages\"", "count"]) { context in
            let row = try #require(try context.fetch(PropertyFetchRequest<Book>(properties: [.count()])).first)
            _ = try row["pages", as: Int.self]
        }
    }

    @Test("Reading a NULL result as a non-optional is typeMismatch", arguments: StoreKind.allCases)
    func nullResultAsNonOptional(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.typeMismatch, mentioning: ["\"top\"", "NULL"]) { context in
            let row = try #require(try context.fetch(PropertyFetchRequest<Book>(properties: [.max(\Book.rating, as: "top")])).first)
            _ = try row["top", as: Double.self]
        }
    }

    @Test("Reading a result as another type is typeMismatch", arguments: StoreKind.allCases)
    func resultAsWrongType(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.typeMismatch, mentioning: ["\"title\""]) { context in
            let row = try #require(try context.fetch(PropertyFetchRequest<Book>(properties: [.value(\Book.title)])).first)
            _ = try row["title", as: Date.self]
        }
    }

    @Test("A sum past 64 bits is integerOverflow", arguments: StoreKind.allCases)
    func sumOverflow(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.container.performBackgroundTask { context in
            for key in ["max-a", "max-b"] {
                let tally = Tally(key: key)
                tally.a = Int.max
                context.insert(tally)
            }
            try context.save()
        }
        try await fixture.expectRefused(.integerOverflow, mentioning: ["Tally", "64-bit"]) { context in
            _ = try context.fetch(PropertyFetchRequest<Tally>(properties: [.sum(\Tally.a)]))
        }
    }

    @Test("A negative history fetch limit is invalidRequest", arguments: StoreKind.allCases)
    func negativeHistoryLimit(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["history", "negative"]) { context in
            _ = try context.fetchHistory(HistoryDescriptor(fetchLimit: -1))
        }
    }

    @Test("A batch insert uniqued by a key path that is not an attribute is invalidRequest", arguments: StoreKind.allCases)
    func batchInsertUniquedByTransient(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "uniqu"]) { context in
            _ = try context.execute(BatchInsertRequest<Book>(rows: [[.set(\Book.isbn, to: "978-9"), .set(\Book.title, to: "New")]],
                                                              uniquing: .update, uniquingBy: [\Book.scratch]))
        }
    }

    @Test("A batch insert that updates matches without a constraint is invalidRequest", arguments: StoreKind.allCases)
    func batchInsertUpdateWithoutConstraint(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Sample", "uniqueness constraint"]) { context in
            _ = try context.execute(BatchInsertRequest<Sample>(rows: [[.set(\Sample.int, to: 1)]], uniquing: .update))
        }
    }

    @Test("A batch update of a transient property is invalidRequest, naming the attributes", arguments: StoreKind.allCases)
    func batchUpdateOfTransient(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["Book", "isbn"]) { context in
            _ = try context.execute(BatchUpdateRequest<Book>(set: [.set(\Book.scratch, to: 3)]))
        }
    }
}
