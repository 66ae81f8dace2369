import Foundation
import Loom
import Testing

/// The bad-input catalogue (`Loom.docc/BadInput.md`): object URIs, object IDs, history tokens and
/// query generations that are malformed or belong to another store. Each is refused with its
/// code and a message naming the URI, ID or token, and the store holds what it held before.
@Suite("Bad input: IDs, URIs and tokens", .timeLimit(.minutes(5)))
struct BadInputIdentityTests {
    /// `coordinator.objectID(forURIRepresentation:)` of `text` must throw `code`.
    func expectURIRefused(_ text: String, _ code: LoomError.Code, mentioning: [String], kind: StoreKind,
                          sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let uri = try #require(URL(string: text))
        try await fixture.expectRefused(code, mentioning: mentioning, sourceLocation: sourceLocation) { context in
            _ = try context.existingObject(with: try context.coordinator.objectID(forURIRepresentation: uri))
        }
    }

    @Test("A URI of another scheme is malformedURI", arguments: StoreKind.allCases)
    func uriOfAnotherScheme(kind: StoreKind) async throws {
        try await expectURIRefused("https://example.com/Book/1", .malformedURI, mentioning: ["loom://"], kind: kind)
    }

    @Test("A URI whose host is not a store UUID is malformedURI", arguments: StoreKind.allCases)
    func uriHostNotAUUID(kind: StoreKind) async throws {
        try await expectURIRefused("loom://not-a-uuid/Book/1", .malformedURI, mentioning: ["UUID"], kind: kind)
    }

    @Test("A URI without /Entity/key is malformedURI", arguments: StoreKind.allCases)
    func uriWithoutEntityAndKey(kind: StoreKind) async throws {
        try await expectURIRefused("loom://\(UUID().uuidString)/Book", .malformedURI, mentioning: ["/<Entity>/<key>"], kind: kind)
    }

    @Test("A URI whose key is not a positive integer is malformedURI", arguments: StoreKind.allCases)
    func uriKeyNotAKey(kind: StoreKind) async throws {
        try await expectURIRefused("loom://\(UUID().uuidString)/Book/-3", .malformedURI, mentioning: ["'-3' is not a primary key"], kind: kind)
        try await expectURIRefused("loom://\(UUID().uuidString)/Book/99999999999999999999", .malformedURI, mentioning: ["is not a primary key"], kind: kind)
    }

    @Test("A URI of another store is foreignObjectID, naming both stores", arguments: StoreKind.allCases)
    func uriOfAnotherStore(kind: StoreKind) async throws {
        let other = UUID()
        try await expectURIRefused("loom://\(other.uuidString)/Book/1", .foreignObjectID, mentioning: [other.uuidString], kind: kind)
    }

    @Test("A URI naming an entity the model lacks is unknownEntity", arguments: StoreKind.allCases)
    func uriOfUnknownEntity(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let store = fixture.container.coordinator.storeIdentifier
        let uri = try #require(URL(string: "loom://\(store.uuidString)/Nope'%22;DROP/1"))
        try await fixture.expectRefused(.unknownEntity, mentioning: ["is not in this store's model"]) { context in
            _ = try context.existingObject(with: try context.coordinator.objectID(forURIRepresentation: uri))
        }
    }

    @Test("The ID of an object that does not exist is objectNotFound from existingObject", arguments: StoreKind.allCases)
    func idOfMissingObject(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let id = try #require(ObjectID<Book>(AnyObjectID(storeIdentifier: fixture.container.coordinator.storeIdentifier, entityName: "Book", primaryKey: 987_654)))
        try await fixture.expectRefused(.objectNotFound, mentioning: ["Book", "987654"]) { context in
            _ = try context.existingObject(with: id)
        }
    }

    @Test("The ID of another store's object is foreignObjectID from object(with:)", arguments: StoreKind.allCases)
    func idOfAnotherStore(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let id = AnyObjectID(storeIdentifier: UUID(), entityName: "Book", primaryKey: 1)
        try await fixture.expectRefused(.foreignObjectID, mentioning: [id.storeIdentifier.uuidString]) { context in
            _ = try context.object(with: id)
        }
    }

    @Test("An ID decoded from JSON naming an entity the model lacks is unknownEntity", arguments: StoreKind.allCases)
    func decodedIDOfUnknownEntity(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let json = try JSONEncoder().encode(AnyObjectID(storeIdentifier: fixture.container.coordinator.storeIdentifier, entityName: "Ghost", primaryKey: 1))
        let id = try JSONDecoder().decode(AnyObjectID.self, from: json)
        try await fixture.expectRefused(.unknownEntity, mentioning: ["Ghost"]) { context in
            _ = try context.existingObject(with: id)
        }
    }

    @Test("An unsaved object's ID used in another context is objectNotSavedYet", arguments: StoreKind.allCases)
    func unsavedIDInAnotherContext(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let before = try await fixture.contents()
        let writer = fixture.container.newBackgroundContext(name: "writer")
        let id = await writer.perform { context in
            let book = Book(isbn: "978-5", title: "Unsaved")
            context.insert(book)
            return book.objectID
        }
        let error = await #expect(throws: LoomError.self) {
            try await fixture.container.performBackgroundTask { context in _ = try context.existingObject(with: id) }
        }
        #expect(error?.code == .objectNotSavedYet, "\(String(describing: error))")
        #expect(try await fixture.contents() == before)
    }

    @Test("A history token of another store is historyTokenForeignStore, for a fetch and a purge", arguments: StoreKind.persistentCases)
    func historyTokenOfAnotherStore(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let token = HistoryToken(storeIdentifier: UUID(), transactionNumber: 1)
        try await fixture.expectRefused(.historyTokenForeignStore, mentioning: [token.storeIdentifier.uuidString]) { context in
            _ = try context.fetchHistory(HistoryDescriptor(after: token))
        }
        try await fixture.expectRefused(.historyTokenForeignStore, mentioning: [token.storeIdentifier.uuidString]) { context in
            try context.deleteHistory(through: token)
        }
    }

    @Test("A history token past the store's last transaction is historyTokenAhead, for a fetch and a purge", arguments: StoreKind.persistentCases)
    func historyTokenAhead(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let token = HistoryToken(storeIdentifier: fixture.container.coordinator.storeIdentifier, transactionNumber: 1_000)
        try await fixture.expectRefused(.historyTokenAhead, mentioning: ["#1000"]) { context in
            _ = try context.fetchHistory(HistoryDescriptor(after: token))
        }
        try await fixture.expectRefused(.historyTokenAhead, mentioning: ["#1000"]) { context in
            try context.deleteHistory(through: token)
        }
    }

    @Test("A history token with a negative number is invalidRequest", arguments: StoreKind.persistentCases)
    func historyTokenNegative(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let token = HistoryToken(storeIdentifier: fixture.container.coordinator.storeIdentifier, transactionNumber: -1)
        try await fixture.expectRefused(.invalidRequest, mentioning: ["negative transaction number"]) { context in
            _ = try context.fetchHistory(HistoryDescriptor(after: token))
        }
    }

    @Test("A history token whose transaction has another fingerprint is historyTokenMismatch", arguments: StoreKind.persistentCases)
    func historyTokenMismatch(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let current = try await fixture.container.performBackgroundTask { try #require(try $0.currentHistoryToken()) }
        let forged = HistoryToken(storeIdentifier: current.storeIdentifier, transactionNumber: current.transactionNumber,
                                  fingerprint: (current.fingerprint ?? 0) &+ 1)
        try await fixture.expectRefused(.historyTokenMismatch, mentioning: ["fingerprint differs"]) { context in
            _ = try context.fetchHistory(HistoryDescriptor(after: forged))
        }
    }

    @Test("A history token older than a purge is historyTokenExpired, naming the oldest kept", arguments: StoreKind.persistentCases)
    func historyTokenExpired(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let first = try await fixture.container.performBackgroundTask { try #require(try $0.currentHistoryToken()) }
        try await fixture.container.performBackgroundTask { context in
            context.insert(Book(isbn: "978-6", title: "Later"))
            try context.save()
            context.insert(Book(isbn: "978-7", title: "Later still"))
            try context.save()
            let transactions = try context.fetchHistory(HistoryDescriptor(after: first))
            try context.deleteHistory(through: transactions[0].token)
        }
        let old = HistoryToken(storeIdentifier: first.storeIdentifier, transactionNumber: 0)
        try await fixture.expectRefused(.historyTokenExpired, mentioning: ["oldest transaction kept"]) { context in
            _ = try context.fetchHistory(HistoryDescriptor(after: old))
        }
    }

    @Test("A query generation of another store is queryGenerationUnavailable", arguments: StoreKind.persistentCases)
    func queryGenerationOfAnotherStore(kind: StoreKind) async throws {
        let fixture = try await BadInputFixture.make(kind)
        let other = try await BadInputFixture.make(kind)
        let pinned = other.container.newBackgroundContext()
        let token = try await pinned.perform { context in
            try context.setQueryGenerationFrom(.current)
            return try #require(context.queryGenerationToken)
        }
        try await fixture.expectRefused(.queryGenerationUnavailable) { context in
            try context.setQueryGenerationFrom(token)
        }
    }
}
