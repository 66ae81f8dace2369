import Foundation
import Loom
@_spi(LoomStore) @testable import LoomCore
import Testing

/// The store contract, driven through the `PersistentStore` protocol alone (no contexts, no
/// coordinator): what every store must do, run on every store.
@Suite("Store contract")
struct StoreContractTests {
    let schema: Schema
    let book: EntityDescription
    init() throws {
        schema = try Schema([Book.self, Shelf.self, Sample.self, Tally.self])
        book = try schema.requireEntity(named: "Book")
    }

    func makeStore(_ kind: StoreKind, at url: URL? = nil) throws -> any PersistentStore {
        switch kind {
        case .inMemory: InMemoryStore(schema: schema)
        case .sqlite: try SQLiteStore(url: url ?? TemporaryDirectory.make().appending(path: "contract.loom"), schema: schema)
        }
    }

    /// A new Book row's values, in slot order.
    func bookValues(isbn: String, title: String, pages: Int = 0) -> [StoredValue] {
        var values = [StoredValue](repeating: .null, count: book.storedValueCount)
        for (i, attribute) in book.attributes.enumerated() {
            switch attribute.name {
            case "isbn": values[i] = .text(isbn)
            case "title": values[i] = .text(title)
            case "pages": values[i] = .integer(Int64(pages))
            case "genre": values[i] = .text("fiction")
            default: break
            }
        }
        return values
    }

    func insert(_ store: any PersistentStore, isbn: String, title: String = "t") throws -> Int64 {
        let key = try store.allocateKeys(for: book, count: 1).lowerBound
        var changes = StoreChangeSet()
        changes.inserts.append(.init(entity: book, key: key, values: bookValues(isbn: isbn, title: title)))
        try store.apply(changes)
        return key
    }

    func titles(_ store: any PersistentStore) throws -> [String] {
        let index = try #require(book.attributes.firstIndex { $0.name == "title" })
        return try store.fetch(StoreQuery(entity: book)).map { row in
            if case .text(let title) = row.values[index] { title } else { "?" }
        }
    }

    @Test("A change set whose later statement fails leaves nothing behind, and names its conflicts", arguments: StoreKind.allCases)
    func applyIsAtomic(kind: StoreKind) throws {
        let store = try makeStore(kind)
        let saved = try insert(store, isbn: "1", title: "Saved")
        let keys = try store.allocateKeys(for: book, count: 2)
        var changes = StoreChangeSet()
        changes.inserts.append(.init(entity: book, key: keys.lowerBound, values: bookValues(isbn: "2", title: "New")))
        changes.inserts.append(.init(entity: book, key: keys.lowerBound + 1, values: bookValues(isbn: "1", title: "Duplicate")))
        let error = try #require(throws: LoomError.self) { try store.apply(changes) }
        #expect(error.code == .uniquenessViolation)
        #expect(error.storeConflicts.count == 1)
        #expect(error.storeConflicts.first?.key == keys.lowerBound + 1)
        #expect(error.storeConflicts.first?.persisted?.key == saved)
        #expect(try titles(store) == ["Saved"])

        var stale = StoreChangeSet()
        stale.inserts.append(.init(entity: book, key: keys.lowerBound, values: bookValues(isbn: "2", title: "New")))
        stale.updates.append(.init(entity: book, key: saved, expectedVersion: 7, changes: []))
        let conflict = try #require(throws: LoomError.self) { try store.apply(stale) }
        #expect(conflict.code == .versionConflict)
        #expect(conflict.storeConflicts.map(\.kind) == [.version])
        #expect(conflict.storeConflicts.first?.persisted?.version == 1)
        #expect(try titles(store) == ["Saved"])
    }

    @Test("Every commit has the next sequence number; a refused one has none", arguments: StoreKind.allCases)
    func receipts(kind: StoreKind) throws {
        let store = try makeStore(kind)
        #expect(store.lastCommitSequence == 0)
        let key = try store.allocateKeys(for: book, count: 1).lowerBound
        var changes = StoreChangeSet()
        changes.inserts.append(.init(entity: book, key: key, values: bookValues(isbn: "1", title: "A")))
        #expect(try store.apply(changes).sequence == 1)
        #expect(throws: LoomError.self) { try store.apply(changes) }   // the key is taken
        let (_, receipt) = try store.withWriteTransaction { () }
        #expect(receipt.sequence == 2)
        #expect(store.lastCommitSequence == 2)
    }

    @Test("A write transaction: its thread sees its writes, others see them only once committed", arguments: StoreKind.allCases)
    func writeScope(kind: StoreKind) throws {
        let store = try makeStore(kind)
        _ = try insert(store, isbn: "1", title: "Before")
        let fromOutside = { () throws -> [String] in
            let result = Locked<Result<[String], any Error>?>(nil)
            let done = DispatchSemaphore(value: 0)
            let contract = self
            Thread.detachNewThread {
                result.withLock { $0 = Result { try contract.titles(store) } }
                done.signal()
            }
            done.wait()
            return try result.withLock { $0! }.get()
        }
        let (inside, receipt) = try store.withWriteTransaction { () throws -> [String] in
            _ = try insert(store, isbn: "2", title: "Inside")
            // A change set refused inside the transaction undoes only itself.
            var duplicate = StoreChangeSet()
            duplicate.inserts.append(.init(entity: book, key: try store.allocateKeys(for: book, count: 1).lowerBound, values: bookValues(isbn: "1", title: "Dup")))
            #expect(throws: LoomError.self) { try store.apply(duplicate) }
            #expect(try fromOutside() == ["Before"])
            return try titles(store)
        }
        #expect(inside == ["Before", "Inside"])
        #expect(receipt.sequence == 2)   // the insert before, then this transaction: one commit
        #expect(try fromOutside() == ["Before", "Inside"])
    }

    @Test("A write transaction whose body throws writes nothing and rethrows the error unchanged", arguments: StoreKind.allCases)
    func writeScopeRollsBack(kind: StoreKind) throws {
        struct Stop: Error {}
        let store = try makeStore(kind)
        _ = try insert(store, isbn: "1", title: "Kept")
        #expect(throws: Stop.self) {
            try store.withWriteTransaction { () throws in
                _ = try insert(store, isbn: "2", title: "Dropped")
                throw Stop()
            }
        }
        #expect(try titles(store) == ["Kept"])
        #expect(store.lastCommitSequence == 1)
        _ = try insert(store, isbn: "3", title: "After")
        #expect(try titles(store) == ["Kept", "After"])
    }

    @Test("Two store instances on one file reserve disjoint keys, even at once")
    func disjointKeys() async throws {
        let url = TemporaryDirectory.make().appending(path: "keys.loom")
        let stores = [try makeStore(.sqlite, at: url), try makeStore(.sqlite, at: url)]
        let book = self.book
        let ranges = try await withThrowingTaskGroup(of: [Range<Int64>].self) { group in
            for store in stores {
                group.addTask {
                    try (0..<50).map { _ in try store.allocateKeys(for: book, count: 7) }
                }
            }
            var all: [Range<Int64>] = []
            for try await part in group { all += part }
            return all
        }
        let keys = ranges.flatMap { Array($0) }
        #expect(keys.count == 2 * 50 * 7)
        #expect(Set(keys).count == keys.count)
    }
}
