import Foundation
import GRDB
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Testing

/// The three defects the I/O-fault loops found (FaultInjectionTests), each reproduced directly,
/// without the fault VFS: the failure each needed is made on purpose where it mattered.
@Suite("Fault-injection fixes, each reproduced directly", .timeLimit(.minutes(5)))
struct FaultFixRegressionTests {
    // MARK: (a) an error that ended the transaction under a savepoint

    @Test("A statement error that made SQLite roll back the whole transaction is reported, not 'no such savepoint'")
    func errorThatEndedTheTransactionIsReported() async throws {
        let url = TemporaryDirectory.make().appending(path: "rolled-back.loom")
        let schema = try Schema([Book.self])
        try SQLiteStore(url: url, schema: schema).close()
        // SQLite rolls the whole transaction back by itself, as it does on some I/O errors and a
        // full disk: a batch request's change set fails under its savepoint, which is then gone.
        let queue = try DatabaseQueue(path: url.path)
        try await queue.write { db in
            try db.execute(sql: """
                CREATE TRIGGER test_rollback BEFORE INSERT ON "Book" WHEN NEW."title" = 'roll back' \
                BEGIN SELECT RAISE(ROLLBACK, 'the whole transaction was rolled back'); END
                """)
        }
        try queue.close()
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        try await container.performBackgroundTask { context in
            context.insert(Book(isbn: "1", title: "Kept"))
            try context.save()
        }
        let error: LoomError? = try await container.performBackgroundTask { context in
            do {
                _ = try context.execute(BatchInsertRequest<Book>(rows: [
                    [.set(\Book.isbn, to: "2"), .set(\Book.title, to: "Fine")],
                    [.set(\Book.isbn, to: "3"), .set(\Book.title, to: "roll back")],
                ]))
                return nil
            } catch let error as LoomError {
                return error
            }
        }
        #expect(error?.message.contains("the whole transaction was rolled back") == true, "\(String(describing: error))")
        #expect(error?.message.contains("savepoint") == false, "\(String(describing: error))")
        #expect(error?.storeCode?.primary == 19, "\(String(describing: error))")   // SQLITE_CONSTRAINT, the trigger's
        // Nothing of the request was written, and the container still writes.
        let after = try await container.performBackgroundTask { context in
            let titles = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title)
            _ = try context.execute(BatchInsertRequest<Book>(rows: [[.set(\Book.isbn, to: "2"), .set(\Book.title, to: "Fine")]]))
            return titles
        }
        #expect(after == ["Kept"])
        let final = try await container.performBackgroundTask { context in try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title) }
        #expect(final == ["Kept", "Fine"])
        try await container.close()
    }

    // MARK: (b) a delete's cascade after a failed read of its relationship

    @Test("A cascade whose relationship could not be read runs again at the retry: no review outlives its novel", arguments: StoreKind.allCases)
    func cascadeRunsAgainAfterAFailedRead(kind: StoreKind) async throws {
        let (container, store) = try kind.makeCountingContainer(types: StoreKind.graphTypes)
        try await container.performBackgroundTask { context in
            let novel = Novel(title: "Gamma", pages: 300)
            context.insert(novel)
            context.insert(Review(text: "long", novel: novel))
            context.insert(Review(text: "short", novel: novel))
            context.insert(Novel(title: "Delta", pages: 400))
            try context.save()
        }
        let firstSave: LoomError? = try await container.performBackgroundTask { context in
            // A new context: the novel's reviews are not loaded, so the delete rule reads them.
            let novel = try #require(try context.fetch(FetchRequest<Novel>(predicate: #Predicate { $0.title == "Gamma" })).first)
            store.failNextReads(1)
            context.delete(novel)
            var failure: LoomError?
            do { try context.save() } catch let error as LoomError { failure = error }
            store.failNextReads(0)
            // The disk is back: the same context saves the deletion, with its cascade.
            try context.save()
            return failure
        }
        #expect(firstSave?.message == CountingStore.readFailure.message, "the first save did not meet the failed read: \(String(describing: firstSave))")
        let left = try await container.performBackgroundTask { context in
            (try context.fetch(FetchRequest<Review>()).map(\.text), try context.fetch(FetchRequest<Novel>()).map(\.title))
        }
        #expect(left.0 == [], "reviews outlived their novel: \(left.0)")
        #expect(left.1 == ["Delta"])
        try await container.close()
    }

    // MARK: (c) a transform stage whose open failed after its migration committed

    /// A SQLite store location whose first open for a transform stage migrates and commits, then
    /// fails, as an open whose later step (its reader pool) met an I/O error did.
    struct FailingAfterMigrating: MigratableStoreLocation {
        let base: SQLiteStore.Location
        let failed = FailedOnce()

        final class FailedOnce: @unchecked Sendable {   // `value` only under `lock`
            private let lock = NSLock()
            private var value = false
            /// `true` the first time only.
            func first() -> Bool { lock.withLock { defer { value = true }; return !value } }
        }

        var path: String { base.path }
        func savedState() throws(LoomError) -> SavedStoreState? { try base.savedState() }
        func open(schema: Schema, metadata: [String: String?], progress: TableMigrationProgress?) throws(LoomError) -> any PersistentStore {
            let store = try base.open(schema: schema, metadata: metadata, progress: progress)
            guard metadata[MigrationPlanRunner.stepKey]??.contains("transforming") == true, failed.first() else { return store }
            try? store.close()
            throw LoomError(.storeFailure, "The store at \(path) failed after its migration committed (on purpose).", path: path)
        }
        func counts(_ queries: [StoreQuery], savedWith schema: Schema) throws(LoomError) -> [Int] { try base.counts(queries, savedWith: schema) }
        func setMetadata(_ value: String?, forKey key: String, in store: any PersistentStore) throws(LoomError) { try base.setMetadata(value, forKey: key, in: store) }
        func withMigrationLock<T: Sendable>(_ body: () async throws -> T) async throws -> T { try await base.withMigrationLock(body) }
        func makeSnapshot() throws(LoomError) -> any MigratableStoreLocation { try base.makeSnapshot() }
        var snapshot: (any MigratableStoreLocation)? { base.snapshot }
        func removeSnapshot() { base.removeSnapshot() }
    }

    @Test("A transform stage's open that failed after its migration committed keeps the old version's copy; the next open resumes")
    func transformKeepsItsCopyWhenItsOpenFailedAfterMigrating() async throws {
        let url = TemporaryDirectory.make().appending(path: "people.loom")
        try await TransformMigrationTests.fillV1(try await PersistentContainer(name: "people", for: PeopleV1.self, location: .file(url)), people: 30)
        let location = FailingAfterMigrating(base: SQLiteStore.Location(url: url))
        await #expect(throws: LoomError.self) {
            _ = try await MigrationPlanRunner.open(location, current: PeopleV2.self, plan: ChunkedPeoplePlan.self)
        }
        // The store is marked as transforming, so its copy of version 1 must still be there.
        #expect(try SQLiteStore.savedState(at: url).metadata[MigrationPlanRunner.stepKey]?.contains("transforming") == true)
        #expect(location.snapshot != nil, "the copy of the old version was removed although the store was migrated")
        // The next open resumes the transform from the copy and ends with every person.
        let container = try await PersistentContainer(name: "people", for: PeopleV2.self, migrationPlan: ChunkedPeoplePlan.self, location: .file(url))
        let people = try await TransformMigrationTests.people(container)
        #expect(people.count == 30)
        #expect(people.first?.hasPrefix("Given0|") == true, "\(people.prefix(2))")
        #expect(location.snapshot == nil)
    }
}
