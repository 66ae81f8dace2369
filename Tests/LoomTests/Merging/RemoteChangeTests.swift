import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) @testable import LoomSQLite
import Synchronization
import Testing

/// Two containers on one file: each learns what the other commits, from the store's history,
/// and merges it as it merges its own contexts' saves.
@Suite("Remote changes", .timeLimit(.minutes(5)))
struct RemoteChangeTests {
    typealias Author = LibraryRelsV2.Author
    typealias Book = LibraryRelsV2.Book
    typealias Tag = LibraryRelsV2.Tag

    static func open(_ url: URL, options: SQLiteStore.Options = SQLiteStore.Options()) throws -> PersistentContainer {
        PersistentContainer(store: try SQLiteStore(url: url, schema: try LibraryRelsV2.schema(), options: options))
    }

    /// Waits (up to 10 s) until `condition`, checked on the main actor, holds.
    @MainActor
    static func eventually(_ condition: @MainActor () throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return try condition()
    }

    @Test("A commit made while a new container's watcher thread is still starting reaches it, not only at the next commit (CI hung on this)")
    @MainActor
    func commitBeforeTheWatcherStarts() async throws {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let writer = try Self.open(url)
        try await writer.save { context in context.insert(Author(name: "Ann")) }
        RemoteCommitWatcher.startDelayForTesting.store(300, ordering: .relaxed)
        let reader = try Self.open(url)   // its watcher's thread starts 300 ms from now
        RemoteCommitWatcher.startDelayForTesting.store(0, ordering: .relaxed)
        let changes = reader.remoteChanges()
        try await writer.save { context in context.insert(Author(name: "Bob")) }   // before it starts
        let heard = Task {
            for await change in changes where !change.transactions.isEmpty { return true }
            return false   // cancelled: never heard
        }
        let deadline = Task {
            try? await Task.sleep(for: .seconds(10))
            heard.cancel()
        }
        #expect(await heard.value)
        deadline.cancel()
        try await reader.close()
        try await writer.close()
    }

    @Test("Another container's saves reach the view context: new values, deleted objects, to-many lists, one objectsDidChange per merge")
    @MainActor
    func viewContextMergesAnotherContainersSaves() async throws {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let writer = try Self.open(url)
        try await writer.save { context in
            let ann = Author(name: "Ann")
            let book = Book(title: "B1")
            context.insert(ann)
            context.insert(book)
            context.insert(Tag(name: "red"))
            book.writer = ann
        }
        let reader = try Self.open(url)
        let view = reader.viewContext
        var changes: [ObjectChanges] = []
        let token = view.addObserver(for: .objectsDidChange) { event in
            if case .objectsDidChange(let c) = event { changes.append(c) }
        }
        defer { view.removeObserver(token) }
        let ann = try #require(try view.fetch(FetchRequest<Author>()).first)
        let b1 = try #require(try view.fetch(FetchRequest<Book>()).first)
        let red = try #require(try view.fetch(FetchRequest<Tag>()).first)
        #expect(ann.works.map(\.title) == ["B1"])
        let redID = red.objectID.erased
        changes = []

        try await writer.save { context in
            let ann = try #require(try context.fetch(FetchRequest<Author>()).first)
            let b1 = try #require(try context.fetch(FetchRequest<Book>()).first)
            b1.title = "B1, revised"
            let b2 = Book(title: "B2")
            context.insert(b2)
            b2.writer = ann
            context.delete(try #require(try context.fetch(FetchRequest<Tag>()).first))
        }
        #expect(await Self.eventually { b1.title == "B1, revised" })
        #expect(ann.works.map(\.title).sorted() == ["B1, revised", "B2"])
        #expect(view.registeredObject(for: redID) == nil)
        let merged = changes.reduce(into: ObjectChanges()) { all, c in
            all.inserted.formUnion(c.inserted); all.updated.formUnion(c.updated); all.deleted.formUnion(c.deleted)
            all.changedProperties.merge(c.changedProperties) { $0.union($1) }
        }
        #expect(merged.inserted.map(\.entityName) == ["Book"])
        #expect(merged.deleted == [redID])
        #expect(merged.changedProperties[b1.objectID.erased] == ["title"])
        #expect(merged.changedProperties[ann.objectID.erased] == ["works"])
        try await writer.close()
        try await reader.close()
    }

    @Test("remoteChanges() hands on every transaction of the other container once, in commit order, and none of its own container's")
    func remoteChangesStream() async throws {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let a = try Self.open(url)
        let b = try Self.open(url)
        let stream = b.remoteChanges()
        let collector = Task { () -> [HistoryTransaction] in
            var seen: [HistoryTransaction] = []
            for await event in stream {
                #expect(!event.historyWasLost)
                #expect(event.token == event.transactions.last?.token)
                seen += event.transactions
                if seen.count >= 40 { break }
            }
            return seen
        }
        for i in 0..<40 {
            try await a.save { context in
                context.transactionAuthor = "a"
                context.insert(Book(title: "A\(i)"))
            }
            if i % 4 == 0 {
                try await b.save { context in
                    context.transactionAuthor = "b"
                    context.insert(Book(title: "B\(i)"))
                }
            }
        }
        let seen = await collector.value
        #expect(seen.count == 40)
        #expect(seen.allSatisfy { $0.author == "a" })
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.token < $1.token })
        let all = try await a.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor(authors: ["a"])) }
        #expect(seen.map(\.token) == all.map(\.token))
        try await a.close()
        try await b.close()
    }

    /// The transactions `stream` hands on until there are `count`, or what came in 20 s.
    static func collect(_ stream: AsyncStream<RemoteChangeEvent>, count: Int) async -> [HistoryTransaction] {
        let collector = Task { () -> [HistoryTransaction] in
            var seen: [HistoryTransaction] = []
            for await event in stream {
                #expect(!event.historyWasLost)
                seen += event.transactions
                if seen.count >= count { break }
            }
            return seen
        }
        let deadline = Task {
            try? await Task.sleep(for: .seconds(20))
            collector.cancel()
        }
        defer { deadline.cancel() }
        return await collector.value
    }

    /// Tells a ``burst(_:author:count:until:)`` to end.
    final class StopFlag: Sendable {
        private let value = Atomic<Bool>(false)
        func stop() { value.store(true, ordering: .releasing) }
        var isStopped: Bool { value.load(ordering: .acquiring) }
    }

    /// `count` saves (or saves until `flag` stops them) of one new book each, one after the
    /// other on a background context of `container`, by `author`, on a thread of their own (not
    /// one of the cooperative pool's few, which the wait would hold).
    static func burst(_ container: PersistentContainer, author: String, count: Int = .max, until flag: StopFlag? = nil) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            Thread {
                do {
                    try container.newBackgroundContext().performAndWait { context in
                        context.transactionAuthor = author
                        var i = 0
                        while i < count, !(flag?.isStopped ?? false) {
                            context.insert(Book(title: "\(author)\(i)"))
                            try context.save()
                            i += 1
                        }
                    }
                    done.resume()
                } catch {
                    done.resume(throwing: error)
                }
            }.start()
        }
    }

    @Test("Two containers saving in bursts at once each hear every transaction of the other once, in commit order, and none of their own")
    func concurrentBursts() async throws {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let a = try Self.open(url)
        let b = try Self.open(url)
        let fromA = b.remoteChanges()
        let fromB = a.remoteChanges()
        let count = 300
        async let savingA: Void = Self.burst(a, author: "a", count: count)
        async let savingB: Void = Self.burst(b, author: "b", count: count)
        _ = try await (savingA, savingB)
        for (heard, from, author) in [(await Self.collect(fromA, count: count), a, "a"), (await Self.collect(fromB, count: count), b, "b")] {
            #expect(heard.count == count)
            #expect(heard.allSatisfy { $0.author == author })
            let all = try await from.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor(authors: [author])) }
            #expect(heard.map(\.token) == all.map(\.token))
        }
        try await a.close()
        try await b.close()
    }

    /// Two containers on one new file; the first on a store whose watcher the test looks into.
    static func watchedPair() throws -> (store: SQLiteStore, a: PersistentContainer, b: PersistentContainer) {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let store = try SQLiteStore(url: url, schema: try LibraryRelsV2.schema())
        return (store, PersistentContainer(store: store), try Self.open(url))
    }

    /// Saves one new book in `b`, by author "b".
    static func saveAsB(_ b: PersistentContainer, title: String) async throws {
        try await b.save { context in
            context.transactionAuthor = "b"
            context.insert(Book(title: title))
        }
    }

    @Test("A burst of a container's own saves is moved past without reading it; another container's save after it still arrives")
    func ownBurstIsSkipped() async throws {
        let (store, a, b) = try Self.watchedPair()
        let fromB = a.remoteChanges()
        // Saves until the watcher has woken up during the burst and skipped (a loaded machine
        // may take long to run its thread).
        let deadline = ContinuousClock.now + .seconds(20)
        var skipped = 0
        while skipped == 0, ContinuousClock.now < deadline {
            try await Self.burst(a, author: "a", count: 100)
            skipped = store.watcher.withLock { $0?.skippedWakeUps ?? 0 }
        }
        #expect(skipped > 0)
        try await Self.saveAsB(b, title: "from b")
        let heard = await Self.collect(fromB, count: 1)
        #expect(heard.map(\.author) == ["b"])
        try await a.close()
        try await b.close()
    }

    @Test("Another container's save made while this container's own burst of saves goes on (its watcher not watching writes) arrives during the burst")
    func remoteSaveDuringOwnBurst() async throws {
        let (store, a, b) = try Self.watchedPair()
        let fromB = a.remoteChanges()
        let flag = StopFlag()
        async let saving: Void = Self.burst(a, author: "a", until: flag)
        // Until a's watcher has moved past its own commits, so that it no longer watches writes.
        let deadline = ContinuousClock.now + .seconds(20)
        while store.watcher.withLock({ $0?.skippedWakeUps ?? 0 }) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        for i in 0..<3 { try await Self.saveAsB(b, title: "from b \(i)") }
        let heard = await Self.collect(fromB, count: 3)
        let stillSaving = !flag.isStopped
        flag.stop()
        try await saving
        #expect(stillSaving)
        #expect(heard.map(\.author) == ["b", "b", "b"])
        try await a.close()
        try await b.close()
    }

    @Test("A background context that merges automatically gets remote saves too; one that does not, only when it asks")
    func backgroundContexts() async throws {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let a = try Self.open(url)
        try await a.save { $0.insert(Book(title: "first")) }
        let b = try Self.open(url)
        let merging = b.newBackgroundContext()
        let idle = b.newBackgroundContext()
        try await merging.perform { context in
            context.automaticallyMergesChanges = true
            _ = try context.fetch(FetchRequest<Book>()).map(\.title)
        }
        try await idle.perform { context in _ = try context.fetch(FetchRequest<Book>()).map(\.title) }
        try await a.save { context in try context.fetch(FetchRequest<Book>()).first!.title = "second" }
        let deadline = ContinuousClock.now + .seconds(10)
        var title = ""
        while ContinuousClock.now < deadline {
            title = try await merging.perform { context in try context.fetch(FetchRequest<Book>()).first!.title }
            if title == "second" { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(title == "second")
        // Not merging: an object it holds keeps the values it loaded until it is refreshed.
        let other = a.newBackgroundContext()
        let kept = try await idle.perform { context -> [String] in
            let book = try context.fetch(FetchRequest<Book>()).first!
            let before = book.title
            try other.performAndWait { context in
                try context.fetch(FetchRequest<Book>()).first!.title = "third"
                try context.save()
            }
            Thread.sleep(forTimeInterval: 0.1)
            let after = book.title
            try context.refresh(book, mergeChanges: true)
            return [before, after, book.title]
        }
        #expect(kept == ["second", "second", "third"])
        try await a.close()
        try await b.close()
    }

    @Test("The other container's save empties its shared cache of the rows it changed: a fault filled later reads the new values")
    func sharedCacheForgetsRemoteChanges() async throws {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let first = try Self.open(url)
        let second = try Self.open(url)
        let id = try await first.save { context in
            let book = Book(title: "First")
            context.insert(book)
            return book.objectID
        }
        // A fault fired through the first coordinator puts the row in its cache.
        #expect(try await first.newBackgroundContext().perform { try $0.object(with: id).title } == "First")
        let changes = first.remoteChanges()
        try await second.save { context in try context.existingObject(with: id).title = "Second" }
        for await change in changes where change.transactions.contains(where: { $0.changes.contains { $0.objectID == id.erased } }) { break }
        #expect(try await first.newBackgroundContext().perform { try $0.object(with: id).title } == "Second")
        try await first.close()
        try await second.close()
    }

    @Test("With history off there is nothing to read remote changes from: the other container sees saves only when it reads the store")
    func historyOff() async throws {
        let url = TemporaryDirectory.make().appending(path: "shared.loom")
        let options = SQLiteStore.Options(recordsHistory: false)
        let a = try Self.open(url, options: options)
        let b = try Self.open(url, options: options)
        let stream = b.remoteChanges()
        try await a.save { $0.insert(Book(title: "unseen")) }
        try await Task.sleep(for: .milliseconds(200))
        try await b.close()
        var events = 0
        for await _ in stream { events += 1 }
        #expect(events == 0)
        try await a.close()
    }

    @Test("A store whose history cannot be read says so: remoteChangesFailure names it, and remoteChanges() ends at once instead of staying silent", .timeLimit(.minutes(5)))
    func watchingCannotStart() async throws {
        let url = TemporaryDirectory.make().appending(path: "damaged.loom")
        try await Self.open(url).close()
        let store = try SQLiteStore(url: url, schema: try LibraryRelsV2.schema())
        // Damaged outside Loom, after the store opened and before its coordinator watches.
        try SQLiteStore.unsafeExecuteRawSQL("DROP TABLE loom_history", at: url)
        let container = PersistentContainer(store: store)
        let failure = try #require(container.coordinator.remoteChangesFailure)
        #expect(failure.code == .storeFailure)
        #expect(failure.message.contains("cannot be watched"))
        var events = 0
        for await _ in container.remoteChanges() { events += 1 }   // ends at once
        #expect(events == 0)
        #expect(try Self.open(TemporaryDirectory.make().appending(path: "fine.loom")).coordinator.remoteChangesFailure == nil)
        try await container.close()
    }
}
