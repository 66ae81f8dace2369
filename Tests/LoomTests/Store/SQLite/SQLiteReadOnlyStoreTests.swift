import Foundation
import GRDB
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Testing

@MainActor
@Suite("SQLite store opened read-only")
struct SQLiteReadOnlyStoreTests {
    /// A closed store of `books` books.
    private static func makeStore(at url: URL, books: Int) async throws {
        let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
        for i in 0..<books { container.viewContext.insert(Book(isbn: "\(i)", title: "Title \(i)")) }
        try container.viewContext.save()
        try await container.close()
    }

    @Test("Reads a store another connection is writing, and leaves its file and WAL as they were")
    func readsWithoutWriting() async throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        try await Self.makeStore(at: url, books: 50)
        // A writer that stays open with a commit in the WAL, not yet checkpointed.
        let writer = try DatabaseQueue(path: url.path)
        try await writer.write { db in try db.execute(sql: "UPDATE Book SET title = 'Changed' WHERE Z_PK = 1") }
        let wal = URL(filePath: url.path + "-wal")
        let walBefore = try Data(contentsOf: wal), fileBefore = try Data(contentsOf: url)
        #expect(!walBefore.isEmpty, "the commit is in the WAL: the test proves nothing about checkpoints otherwise")

        let store = try SQLiteStore(readingAt: url)
        #expect(store.isReadOnly)
        let book = try #require(store.schema.entity(named: "Book"))
        #expect(try store.count(StoreQuery(entity: book)) == 50)
        #expect(try store.fetch(StoreQuery(entity: book)).contains { $0.values.contains(.text("Changed")) }, "reads see the WAL's commit")
        #expect(try (store.maintenanceState().nextKeys["Book"] ?? 0) > 50)
        #expect(try store.checkIntegrity(quick: false, limit: 10).isEmpty)
        try store.close()

        // A read-write close checkpoints the WAL into the file and truncates it; this one did not.
        #expect(try Data(contentsOf: wal) == walBefore)
        #expect(try Data(contentsOf: url) == fileBefore)
        try writer.close()
    }

    @Test("Every write is refused by name, and the file is left as it was")
    func refusesWrites() async throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        try await Self.makeStore(at: url, books: 2)
        let before = try SQLiteStore.contentDump(at: url)
        let store = try SQLiteStore(readingAt: url)
        let book = try #require(store.schema.entity(named: "Book"))
        let keys = try #require(throws: LoomError.self) { try store.allocateKeys(for: book, count: 1) }
        #expect(keys.code == .invalidRequest)
        #expect(keys.message.contains("opened read-only"))
        #expect(keys.path == url.path)
        let transaction = try #require(throws: LoomError.self) { try store.withWriteTransaction { () } }
        #expect(transaction.code == .invalidRequest)
        let apply = try #require(throws: LoomError.self) { try store.apply(StoreChangeSet()) }
        #expect(apply.code == .invalidRequest)
        #expect(try store.count(StoreQuery(entity: book)) == 2)
        try store.close()
        #expect(try SQLiteStore.contentDump(at: url) == before)
    }

    @Test("A store that needs a migration to the model is refused, not migrated")
    func refusesAMigration() async throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        try await Self.makeStore(at: url, books: 1)
        let before = try Data(contentsOf: url)
        var options = SQLiteStore.Options()
        options.isReadOnly = true
        let error = try #require(throws: LoomError.self) {
            try SQLiteStore(url: url, schema: Schema(Book.self, Shelf.self), options: options)
        }
        #expect(error.code == .schemaMismatch)
        #expect(error.message.contains("needs a migration"))
        #expect(error.path == url.path)
        #expect(try Data(contentsOf: url) == before)
        // Read-write, the same model migrates it: the refusal was the read-only mode's.
        try SQLiteStore(url: url, schema: Schema(Book.self, Shelf.self)).close()
    }

    @Test("A missing file, an empty one and a foreign database are refused and not created or changed")
    func refusesWhatIsNotAStore() throws {
        let folder = TemporaryDirectory.make()
        var options = SQLiteStore.Options()
        options.isReadOnly = true

        let missing = folder.appending(path: "absent.loom")
        let absent = try #require(throws: LoomError.self) { try SQLiteStore(url: missing, schema: Schema(Book.self), options: options) }
        #expect(absent.code == .storeFailure)
        #expect(absent.message.contains("There is no store at \(missing.path)"))
        #expect(!FileManager.default.fileExists(atPath: missing.path), "a read-only open creates nothing")

        let empty = folder.appending(path: "empty.loom")
        try Data().write(to: empty)
        let nothing = try #require(throws: LoomError.self) { try SQLiteStore(url: empty, schema: Schema(Book.self), options: options) }
        #expect(nothing.code == .storeFailure)
        #expect(try Data(contentsOf: empty).isEmpty)

        let foreign = folder.appending(path: "people.sqlite")
        try ForeignDatabase.create(at: foreign)
        let bytes = try Data(contentsOf: foreign)
        let notLoom = try #require(throws: LoomError.self) { try SQLiteStore(url: foreign, schema: Schema(Book.self), options: options) }
        #expect(notLoom.code == .notALoomStore)
        #expect(notLoom.message == "\(foreign.path) is not a Loom store (it has no loom_metadata table).")
        #expect(try Data(contentsOf: foreign) == bytes)
    }
}
