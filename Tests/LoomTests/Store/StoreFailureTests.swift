import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Synchronization
import Testing

/// A store that fails (here: one that was closed) reaches the caller as an error, never as a
/// trap: throwing calls throw it, the others leave objects readable and note it for the next
/// save (`pendingStoreError`).
@MainActor
@Suite("Store failures", .timeLimit(.minutes(5)))
struct StoreFailureTests {
    struct UserError: Error, Equatable {
        let value: Int
    }

    /// The code of the ``LoomError`` that `body` throws; `nil` when it throws none.
    func code<T>(_ body: () throws -> T) -> LoomError.Code? {
        do { _ = try body(); return nil } catch { return (error as? LoomError)?.code }
    }

    func code<T>(_ body: () async throws -> T) async -> LoomError.Code? {
        do { _ = try await body(); return nil } catch { return (error as? LoomError)?.code }
    }

    @Test("Inserting after close does not crash; the next save throws closed", arguments: StoreKind.allCases)
    func insertAfterClose(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        try await container.close()
        let book = Book(context: context)           // no key can be reserved any more
        book.title = "After"
        #expect(book.title == "After")
        #expect(context.hasChanges)
        #expect(context.pendingStoreError?.code == .closed)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .closed)
        let again = try #require(throws: LoomError.self) { try context.save() }
        #expect(again.code == .closed)
        context.rollback()
        #expect(!context.hasChanges)
        #expect(context.pendingStoreError == nil)
    }

    @Test("Relating a new object after close does not crash; the next save throws closed", arguments: StoreKind.allCases)
    func relateAfterClose(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let author = Author(name: "Ann")
        context.insert(author)
        try context.save()
        try await container.close()
        let novel = Novel(title: "Late")
        novel.author = author                       // inserts it: no key can be had
        author.novels.insert(Novel(title: "Later"))
        #expect(context.pendingStoreError?.code == .closed)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .closed)
    }

    @Test("A fault fired after close does not crash: it stays a fault and reports closed", arguments: StoreKind.allCases)
    func faultAfterClose(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Saved", pages: 12)
        context.insert(book)
        try context.save()
        let id = book.objectID
        context.reset()
        let fault = try context.object(with: id)
        #expect(fault.isFault)
        try await container.close()

        #expect(fault.pages == 0)                   // a placeholder, never a stale value
        #expect(fault.title == "")
        #expect(fault.isFault)                      // not forgotten, not deleted
        #expect(!fault.isDeleted)
        #expect(context.registeredObject(for: id) === fault)
        #expect(context.pendingStoreError?.code == .closed)
        #expect(code { try context.fulfillFault(of: fault) } == .closed)
        #expect(code { try context.existingObject(with: id) } == .closed)
        #expect(code { try context.save() } == .closed)
        #expect(context.pendingStoreError == nil)   // reported once
    }

    @Test("A to-many relationship read after close does not crash", arguments: StoreKind.allCases)
    func toManyAfterClose(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let author = Author(name: "Ann")
        context.insert(author)
        author.novels = [Novel(title: "One"), Novel(title: "Two")]
        try context.save()
        let id = author.objectID
        context.reset()
        let loaded = try context.existingObject(with: id)
        try await container.close()

        #expect(loaded.novels.isEmpty)               // could not be loaded
        #expect(context.pendingStoreError?.code == .closed)
        context.delete(loaded)                       // delete rules cannot load it either
        #expect(code { try context.save() } == .closed)
    }

    @Test("Reading a batched fetch after close does not crash, and the error is observable", arguments: StoreKind.allCases)
    func batchAfterClose(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        for i in 0..<10 { context.insert(Book(isbn: "\(i)", title: "Book \(i)", pages: i + 1)) }
        try context.save()
        context.reset()
        let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)]), batchSize: 4)
        try await container.close()

        var pages = 0
        for book in books { pages += book.pages }
        #expect(books.count == 10)
        #expect(pages == 0)                          // faults showing placeholders
        #expect(context.pendingStoreError?.code == .closed)
        #expect(code { try context.save() } == .closed)
    }

    @Test("Every read and every save after close throws closed", arguments: StoreKind.allCases)
    func everythingAfterCloseThrowsClosed(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let context = container.viewContext
        let book = Book(isbn: "1", title: "Saved")
        context.insert(book)
        try context.save()
        let id = book.objectID
        let background = container.newBackgroundContext()
        let backgroundID = try await background.perform { context in
            let book = Book(isbn: "2", title: "Background")
            context.insert(book)
            try context.save()
            return book.objectID
        }
        try await container.close()

        #expect(code { try context.fetch(FetchRequest<Book>()) } == .closed)
        #expect(code { try context.count(for: FetchRequest<Book>()) } == .closed)
        #expect(code { try context.existingObject(with: id) } == .closed)
        let entity = try #require(container.schema.entity(named: "Book"))
        #expect(code { try container.coordinator.store.allocateKeys(for: entity, count: 1) } == .closed)

        book.title = "Changed"
        #expect(code { try context.save() } == .closed)
        let backgroundError = await background.perform { context -> LoomError? in
            do {
                let book = try context.object(with: backgroundID)
                book.title = "Changed"
                try context.save()
                return nil
            } catch {
                return error as? LoomError
            }
        }
        #expect(backgroundError?.code == .closed)
        #expect(await code { try await container.save { context in context.insert(Book(isbn: "3", title: "Helper")) } } == .closed)
        #expect(await code { try await container.performExclusiveWrite { context in context.insert(Book(isbn: "4", title: "Exclusive")) } } == .closed)
        #expect(await code { try await container.performBackgroundTask { context in try context.save() } } == .closed)
        try await container.close()                  // closing again does nothing
    }

    /// Holds the writer in the first queued save until the test lets it go.
    final class Gate: Sendable {
        let release = DispatchSemaphore(value: 0)
        let entered = Atomic<Bool>(false)
        let closed = Atomic<Bool>(false)
    }

    @Test("Saves queued before close all finish and are durable; a save after close throws closed")
    func closeWaitsForQueuedSaves() async throws {
        let url = TemporaryDirectory.make().appending(path: "queued.loom")
        let schema = try Schema(Book.self)
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        let gate = Gate()
        // The first save holds the writer, so that the others queue behind it.
        let first = Task {
            try await container.save { context in
                gate.entered.store(true, ordering: .releasing)
                gate.release.wait()
                context.insert(Book(isbn: "first", title: "Queued"))
            }
        }
        while !gate.entered.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(5)) }
        let count = 20
        var saves: [Task<Void, any Error>] = []
        for i in 0..<count {
            saves.append(Task.detached {
                try await container.save { context in
                    for j in 0..<50 { context.insert(Book(isbn: "\(i)-\(j)", title: "Queued")) }
                }
            })
        }
        try await Task.sleep(for: .milliseconds(300))   // every save above has asked for its turn
        let closing = Task { @MainActor in           // from the main actor, as an app closes
            try await container.close()
            gate.closed.store(true, ordering: .releasing)
        }
        try await Task.sleep(for: .milliseconds(100))
        let closedEarly = gate.closed.load(ordering: .acquiring)
        #expect(!closedEarly)                          // waiting for the queued saves
        gate.release.signal()
        try await closing.value
        try await first.value
        for save in saves { try await save.value }     // none failed
        #expect(await code { try await container.save { context in context.insert(Book(isbn: "late", title: "Late")) } } == .closed)

        let reopened = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        #expect(try reopened.viewContext.count(for: FetchRequest<Book>()) == count * 50 + 1)
        try await reopened.close()
    }

    @Test("A SQLite failure keeps the SQLite error and its result codes")
    func sqliteResultCode() async throws {
        let container = try StoreKind.sqlite.makeContainer()
        let context = container.viewContext
        context.insert(Book(isbn: "1", title: "First"))
        try context.save()
        // Another container on the same file cannot see the first's pending objects: the
        // duplicate reaches SQLite's unique index.
        let other = container.newBackgroundContext()
        let error = await other.perform { context -> LoomError? in
            context.insert(Book(isbn: "1", title: "Twin"))
            do { try context.save(); return nil } catch { return error as? LoomError }
        }
        let failure = try #require(error)
        #expect(failure.code == .uniquenessViolation)
        #expect(failure.storeCode == .sqliteConstraintUnique)
        let underlying = try #require(failure.underlying)
        #expect(String(describing: type(of: underlying)) == "DatabaseError")

        try await container.close()
    }

    @Test("A failure of the SQLite file itself carries its result code")
    func sqliteResultCodeOfDamagedFile() throws {
        let url = TemporaryDirectory.make().appending(path: "damaged.loom")
        let data = Data("SQLite format 3\0".utf8) + Data(repeating: 0xA5, count: 4096)
        try data.write(to: url)
        let error = try #require(throws: LoomError.self) { try SQLiteStore(url: url, schema: Schema(Book.self)) }
        #expect(error.storeCode != nil)
        #expect(error.underlying != nil)
    }

    @Test("A user error thrown in a container helper comes back unchanged", arguments: StoreKind.allCases)
    func userErrorsAreRethrown(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        await #expect(throws: UserError(value: 1)) {
            try await container.save { _ in throw UserError(value: 1) }
        }
        await #expect(throws: UserError(value: 2)) {
            try await container.performExclusiveWrite { context in
                context.insert(Book(isbn: "x", title: "Discarded"))
                throw UserError(value: 2)
            }
        }
        await #expect(throws: UserError(value: 3)) {
            try await container.performBackgroundTask { _ in throw UserError(value: 3) }
        }
        #expect(try container.viewContext.count(for: FetchRequest<Book>()) == 0)
        try await container.close()
    }
}
