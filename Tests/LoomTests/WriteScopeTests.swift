import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomPostgreSQL
@_spi(LoomStore) import LoomSQLite
import Synchronization
import Testing

/// The write scope every store composes (`WriteScope`): which thread holds the write, the
/// commits' numbers, and migrations numbered and receipted as saves are.
@Suite("Write scope")
struct WriteScopeTests {
    @Test("Only the thread inside a store's write transaction holds its write, and only until the commit", arguments: StoreKind.allCases)
    func writeIsHeldByTheTransactionsThread(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let store = container.coordinator.store
        #expect(!store.writeScope.isHeldByCurrentThread)
        let (inside, otherThread) = try store.withWriteTransaction { () throws -> (Bool, Bool) in
            (store.writeScope.isHeldByCurrentThread, Self.onAnotherThread { store.writeScope.isHeldByCurrentThread })
        }.value
        #expect(inside)
        #expect(!otherThread)
        #expect(!store.writeScope.isHeldByCurrentThread)
        try await container.close()
    }

    @Test("An exclusive write holds the store's write on its thread: its saves and the batch requests made in it join it", arguments: StoreKind.allCases)
    func exclusiveWriteJoinsItsSavesAndBatches(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let store = container.coordinator.store
        let before = store.lastCommitSequence
        let held = try await container.performExclusiveWrite { context in
            context.insert(Book(isbn: "1", title: "Inside"))
            try context.save()
            _ = try context.execute(BatchUpdateRequest<Book>(set: [.set(\.title, to: "Batched")]))
            return context.coordinator.store.writeScope.isHeldByCurrentThread
        }
        #expect(held)
        // The save and the batch request committed with the exclusive write, as one commit.
        #expect(store.lastCommitSequence == before + 1)
        let titles = try await container.performBackgroundTask { context in try context.fetch(FetchRequest<Book>()).map(\.title) }
        #expect(titles == ["Batched"])
        try await container.close()
    }

    @Test("A migration made on opening is the store's first commit, with a receipt; a store already on the model has none",
          arguments: StoreKind.persistentCases)
    func migrationHasAReceipt(kind: StoreKind) async throws {
        let open = try Self.opener(kind)
        try await NotesV1.fill(PersistentContainer(store: try open(try NotesV1.schema()).store))
        let migrated = try open(try NotesV2.schema())
        #expect(migrated.receipt == CommitReceipt(sequence: 1))
        #expect(migrated.store.lastCommitSequence == 1)
        try await Self.expectNextSaveIsNumbered(2, PersistentContainer(store: migrated.store))
        let reopened = try open(try NotesV2.schema())
        #expect(reopened.receipt == nil)
        #expect(reopened.store.lastCommitSequence == 0)
        try reopened.store.close()
    }

    /// Opens a new store of `kind` (the same one at every call) with a model: the store, and
    /// the receipt of the migration it made.
    private static func opener(_ kind: StoreKind) throws -> (Schema) throws -> (store: any PersistentStore, receipt: CommitReceipt?) {
        switch kind {
        case .sqlite:
            let url = TemporaryDirectory.make().appending(path: "notes.loom")
            return { schema in
                let store = try SQLiteStore(url: url, schema: schema)
                return (store, store.migrationReceipt)
            }
        case .postgres:
            let configuration = try PostgresServer.configuration()
            return { schema in
                let store = try PostgreSQLStore(configuration: configuration, schema: schema)
                return (store, store.migrationReceipt)
            }
        case .inMemory:
            throw LoomError(.storeFailure, "An in-memory store is never migrated.")
        }
    }

    /// Saves a note in `container` and expects the save's commit number; closes the container.
    private static func expectNextSaveIsNumbered(_ number: UInt64, _ container: PersistentContainer) async throws {
        let saved = try await container.performBackgroundTask { context in
            context.insert(NotesV2.Note(heading: "After"))
            try context.save()
            return context.lastSaveNumber
        }
        #expect(saved == number)
        try await container.close()
    }

    private static func onAnotherThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            result.withLock { $0 = body() }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}
