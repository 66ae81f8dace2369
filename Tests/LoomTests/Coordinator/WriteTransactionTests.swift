import Foundation
import Loom
@_spi(LoomStore) @testable import LoomCore
import Testing

/// The store's write scope: exclusive writes that exclude every other writer (other
/// containers, other processes), whose reads see their own writes, and that never hold a lock
/// of Loom's across the user's merge resolvers.
@Suite("Write transactions", .timeLimit(.minutes(5)))
struct WriteTransactionTests {
    /// A container on a SQLite file, with the test models.
    static func open(_ url: URL) throws -> PersistentContainer {
        PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema([Book.self, Shelf.self, Sample.self, Tally.self])))
    }

    /// Where the two-process test keeps its store: named after the test process, which is the
    /// parent of the exit tests' processes.
    static func counterStore(parent: Int32) -> URL {
        FileManager.default.temporaryDirectory.appending(path: "loom-counter-\(parent).loom")
    }

    /// Adds 1 to the counter `rounds` times, each in its own exclusive write.
    static func increment(_ container: PersistentContainer, rounds: Int) async throws {
        for _ in 0..<rounds {
            try await container.performExclusiveWrite { context in
                let counter = try #require(try context.fetch(FetchRequest<Tally>(predicate: #Predicate { $0.key == "counter" })).first)
                counter.a += 1
            }
        }
    }

    @Test("What an exclusive write reads sees what it saved, before the commit", arguments: StoreKind.allCases)
    func readsSeeTheTransaction(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let seen = try await container.performExclusiveWrite { context in
            context.insert(Tally(key: "one"))
            try context.save()
            // No unsaved changes now: the fetch and the count go to the store.
            let count = try context.count(for: FetchRequest<Tally>())
            let keys = try context.fetch(FetchRequest<Tally>()).map(\.key)
            return (count, keys)
        }
        #expect(seen.0 == 1)
        #expect(seen.1 == ["one"])
    }

    @Test("A throwing exclusive write leaves the store and every other context unchanged", arguments: StoreKind.allCases)
    func throwingBlockRollsBack(kind: StoreKind) async throws {
        struct Refused: Error, Equatable { let reason: String }
        let container = try kind.makeContainer()
        try await container.save { context in context.insert(Tally(key: "kept")) }
        let watcher = container.newBackgroundContext(name: "watcher")
        let heard = Locked<Int>(0)
        await watcher.perform { context in
            context.automaticallyMergesChanges = true
            context.addObserver(for: .objectsDidChange) { _ in heard.withLock { $0 += 1 } }
        }
        let error = await #expect(throws: Refused.self) {
            try await container.performExclusiveWrite { context in
                context.insert(Tally(key: "dropped"))
                try context.save()
                try #require(try context.fetch(FetchRequest<Tally>()).first { $0.key == "kept" }).a = 7
                try context.save()
                throw Refused(reason: "changed my mind")
            }
        }
        #expect(error == Refused(reason: "changed my mind"))
        await watcher.perform { _ in }
        #expect(heard.withLock { $0 } == 0, "no save of the rolled-back block was delivered")
        let stored = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Tally>()).map { "\($0.key) \($0.a)" }
        }
        #expect(stored == ["kept 0"])
        // The container goes on working.
        try await Self.increment(container, rounds: 0)
        try await container.save { context in context.insert(Tally(key: "later")) }
        #expect(try await container.performBackgroundTask { try $0.count(for: FetchRequest<Tally>()) } == 2)
    }

    @Test("Exclusive writes of two containers on one file never lose an increment")
    func twoContainersIncrement() async throws {
        let url = TemporaryDirectory.make().appending(path: "counter.loom")
        let first = try Self.open(url)
        let second = try Self.open(url)
        try await first.save { context in context.insert(Tally(key: "counter")) }
        // 20 rounds each: the two containers take SQLite's write lock in turns through its busy
        // handler, which polls, so rounds slow down sharply when the whole suite shares two
        // cores; more rounds add nothing to what the test shows (no increment lost).
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await Self.increment(first, rounds: 20) }
            group.addTask { try await Self.increment(second, rounds: 20) }
            try await group.waitForAll()
        }
        let value = try await first.performBackgroundTask { context in
            try context.fetch(FetchRequest<Tally>()).first?.a
        }
        #expect(value == 40)
    }

    @Test("Keys reserved inside a rolled-back exclusive write are never handed out twice")
    func rolledBackKeys() async throws {
        struct Stop: Error {}
        let url = TemporaryDirectory.make().appending(path: "keys.loom")
        let first = try Self.open(url)
        await #expect(throws: Stop.self) {
            try await first.performExclusiveWrite { context in
                for i in 0..<10 { context.insert(Tally(key: "dropped \(i)")) }   // reserves a block in the transaction
                try context.save()
                throw Stop()
            }
        }
        let second = try Self.open(url)
        // The second store gets the rolled-back keys from the file; the first must not use its
        // rolled-back block's rest.
        try await second.save { context in for i in 0..<40 { context.insert(Tally(key: "second \(i)")) } }
        try await first.save { context in for i in 0..<10 { context.insert(Tally(key: "first \(i)")) } }
        let count = try await second.performBackgroundTask { try $0.count(for: FetchRequest<Tally>()) }
        #expect(count == 50)
    }

    @Test("Exclusive writes of two processes on one file never lose an increment", .ownThreads)
    func twoProcessesIncrement() async throws {
        let url = Self.counterStore(parent: getpid())
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
        }
        let container = try Self.open(url)
        try await container.save { context in context.insert(Tally(key: "counter")) }
        try await container.close()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    await #expect(processExitsWith: .success) {
                        let container = try WriteTransactionTests.open(WriteTransactionTests.counterStore(parent: getppid()))
                        try await WriteTransactionTests.increment(container, rounds: 100)
                        try await container.close()
                    }
                }
            }
        }
        let reopened = try Self.open(url)
        let value = try await reopened.performBackgroundTask { context in
            try context.fetch(FetchRequest<Tally>()).first?.a
        }
        #expect(value == 200)
        try await reopened.close()
    }

    /// Until a write transaction commits, other contexts read the rows as they were before it,
    /// even when the shared cache held the rows its saves changed; after it commits, none of
    /// them is filled from a row read before the commit. (A row read meanwhile and cached once
    /// made a worker of the stress suite add to a value older than its own last save.)
    @Test("Other contexts read a write transaction's rows only once it commits, and nothing older after", arguments: StoreKind.allCases, [false, true])
    func readsDuringAWrite(kind: StoreKind, rowWasCached: Bool) async throws {
        let (container, id) = try await Self.containerWithTally(kind, key: "read meanwhile")
        if rowWasCached {
            let a = try await container.newBackgroundContext(name: "warming").perform { context in try context.object(with: id).a }
            #expect(a == 0)
        }
        let holding = container.newBackgroundContext(name: "holding")
        await holding.perform { context in context.retainsRegisteredObjects = true }
        let seenDuring = try await container.performExclusiveWrite { context in
            try context.existingObject(with: id).a = 1
            try context.save()
            // A fault of another context on this thread reads the transaction's own save (from
            // the store's writer connection), which must not reach the shared cache.
            let own = try container.newBackgroundContext(name: "same thread").performAndWait { context in
                try context.object(with: id).a
            }
            return (own, try Self.readElsewhere(id, in: container, holding: holding))
        }
        #expect(seenDuring.0 == 1, "the transaction's thread reads its own save")
        let seenElsewhere = seenDuring.1
        #expect(seenElsewhere.faulted == 0, "a fault read the row before the transaction committed")
        #expect(seenElsewhere.fetched == 0, "a fetch read the row before the transaction committed")
        // Once it commits, a fault filled from the shared cache shows the save...
        let faulted = try await container.newBackgroundContext(name: "after").perform { context in
            try context.object(with: id).a
        }
        #expect(faulted == 1, "a fault was filled with the row read while the transaction was open")
        // ...and so does a fault that holds the row its fetch read during the transaction.
        let held = try await holding.perform { context in try context.object(with: id).a }
        #expect(held == 1, "a fault kept the row its fetch read while the transaction was open")
    }

    @Test("Other contexts never see what a rolled-back write transaction saved", arguments: StoreKind.allCases)
    func rolledBackWriteIsNeverSeen(kind: StoreKind) async throws {
        struct Refused: Error {}
        let (container, id) = try await Self.containerWithTally(kind, key: "rolled back")
        // The shared cache holds the row: the save inside would update it.
        _ = try await container.newBackgroundContext(name: "warming").perform { context in try context.object(with: id).a }
        let seenDuring = Locked<(faulted: Int, fetched: Int)?>(nil)
        await #expect(throws: Refused.self) {
            try await container.performExclusiveWrite { context in
                try context.existingObject(with: id).a = 1
                try context.save()
                let seen = try Self.readElsewhere(id, in: container)
                seenDuring.withLock { $0 = seen }
                throw Refused()
            }
        }
        #expect(seenDuring.withLock { $0?.faulted } == 0, "a fault read a save that was rolled back")
        #expect(seenDuring.withLock { $0?.fetched } == 0)
        let after = try await container.newBackgroundContext(name: "after").perform { context in try context.object(with: id).a }
        #expect(after == 0)
    }

    /// Reads the tally `id` on another thread (waiting for a context on the transaction's thread
    /// could run its body there, inside the transaction): through a fault, through a fetch, and
    /// with a fetch of `holding` whose faults keep their rows unfired.
    static func readElsewhere(_ id: ObjectID<Tally>, in container: PersistentContainer, holding: BackgroundContext? = nil) throws -> (faulted: Int, fetched: Int) {
        let faulting = container.newBackgroundContext(name: "faulting")
        let fetching = container.newBackgroundContext(name: "fetching")
        return try onAnotherThread {
            let faulted = try faulting.performAndWait { context in try context.object(with: id).a }
            let fetched = try fetching.performAndWait { context in try #require(try context.fetch(FetchRequest<Tally>()).first).a }
            _ = try holding?.performAndWait { context in try context.fetch(FetchRequest<Tally>()).count }
            return (faulted, fetched)
        }
    }

    /// A write transaction changing more rows than the change log keeps (a large batch request)
    /// does not list them all for its commit: it forgets the whole cache then.
    @Test("A write transaction's list of changed rows is bounded by the change log's limit")
    func changedRowsAreBounded() throws {
        let schema = try Schema([Book.self, Shelf.self, Sample.self, Tally.self])
        let entity = try schema.requireEntity(named: "Tally")
        func changes(_ keys: Range<Int64>) -> StoreChangeSet {
            var set = StoreChangeSet()
            set.updates = keys.map { .init(entity: entity, key: $0, expectedVersion: 1, changes: []) }
            return set
        }
        var write = PersistentStoreCoordinator.OpenWrite(holdsEvents: false)
        write.noteChanged(changes(0..<10))
        #expect(write.changedRows.count == 10)
        #expect(!write.changedTooMany)
        write.noteChanged(changes(10..<Int64(PersistentStoreCoordinator.ChangeLog.limit)))
        #expect(write.changedRows.count == PersistentStoreCoordinator.ChangeLog.limit)
        #expect(!write.changedTooMany)
        write.noteChanged(changes(0..<1))
        #expect(write.changedTooMany)
        #expect(write.changedRows.isEmpty, "the list is dropped, not kept growing")
        write.noteChanged(changes(0..<5))
        #expect(write.changedRows.isEmpty)
    }

    /// A fresh container of `kind` holding one saved tally, and the tally's ID.
    static func containerWithTally(_ kind: StoreKind, key: String) async throws -> (PersistentContainer, ObjectID<Tally>) {
        let container = try kind.makeContainer()
        let id = try await container.save { context in
            let tally = Tally(key: key)
            context.insert(tally)
            return tally.objectID
        }
        return (container, id)
    }

    @Test("A custom merge resolver runs with no lock held: it may wait for another context's save", .timeLimit(.minutes(5)), arguments: StoreKind.allCases)
    func resolverHoldsNoLock(kind: StoreKind) async throws {
        let (container, id) = try await Self.containerWithTally(kind, key: "contested")
        let mine = container.newBackgroundContext(name: "mine")
        let other = container.newBackgroundContext(name: "other")
        let resolved = Locked(0)
        try await mine.perform { context in
            context.retainsRegisteredObjects = true
            context.mergePolicy = .custom { _ in
                // Another context saves, synchronously, while this save resolves its conflict.
                let saved = Result { try other.performAndWait { context in
                    context.insert(Tally(key: "saved during resolution"))
                    try context.save()
                } }
                resolved.withLock { $0 += 1 }
                return (try? saved.get()) != nil ? .objectTrump : .fail
            }
            _ = try context.existingObject(with: id).a   // loaded at version 1
        }
        try await other.perform { context in
            try context.existingObject(with: id).b = 1
            try context.save()
        }
        try await mine.perform { context in
            try context.object(with: id).a = 5   // still version 1 here: the save conflicts
            try context.save()
        }
        #expect(resolved.withLock { $0 } == 1)
        let stored = try await container.performBackgroundTask { context in
            (try context.existingObject(with: id).fields, try context.count(for: FetchRequest<Tally>()))
        }
        #expect(stored.0 == [5, 1, 0, 0])
        #expect(stored.1 == 2)
    }
}
