import Foundation
import Loom
@_spi(LoomStore) @testable import LoomCore
import Testing

/// Saves reach other contexts in the order the store committed them, with the rows they saved.
@Suite("Commit order", .timeLimit(.minutes(5)))
struct CommitOrderTests {
    /// Waits on a semaphore without blocking the cooperative pool.
    static func wait(_ semaphore: DispatchSemaphore) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { semaphore.wait(); continuation.resume() }
        }
    }

    @Test("A save held up after its commit is still merged before the saves that committed after it", arguments: StoreKind.allCases)
    func deliveryFollowsCommitOrder(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let observer = container.newBackgroundContext(name: "observer")
        // What the observer learns, event by event: (inserted, updated) IDs.
        let seen = Locked<[(inserted: Set<AnyObjectID>, updated: Set<AnyObjectID>)]>([])
        await observer.perform { context in
            context.automaticallyMergesChanges = true
            context.addObserver(for: .objectsDidChange) { event in
                if case .objectsDidChange(let changes) = event { seen.withLock { $0.append((changes.inserted, changes.updated)) } }
            }
        }

        // Save N inserts a book, then its saver is held up after the commit (in its didSave
        // observer), before it could hand the save on.
        let committed = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let first = container.newBackgroundContext(name: "first")
        let inserting = Task {
            try await first.perform { context in
                context.addObserver(for: .didSave) { _ in
                    committed.signal()
                    release.wait()
                }
                let book = Book(isbn: "1", title: "First")
                context.insert(book)
                try context.save()
                return book.objectID
            }
        }
        await Self.wait(committed)

        // Save N+1 changes that book and hands its save on at once.
        try await container.newBackgroundContext(name: "second").perform { context in
            let book = try #require(try context.fetch(FetchRequest<Book>()).first)
            book.title = "Second"
            try context.save()
        }
        await observer.perform { _ in }   // whatever was delivered to it is merged by now
        release.signal()
        let id = try await inserting.value.erased
        await observer.perform { _ in }

        // The observer heard of the insert first (or of both at once), never of an update to
        // an object it had not heard of.
        let events = seen.withLock { $0 }
        let firstMention = try #require(events.first { $0.inserted.contains(id) || $0.updated.contains(id) })
        #expect(firstMention.inserted.contains(id))
        let title = try await observer.perform { context in try context.existingObject(with: ObjectID<Book>(id)!).title }
        #expect(title == "Second")
    }

    @Test("Merging takes every saved row from the save itself, with no read", arguments: StoreKind.allCases)
    func mergeCarriesRows(kind: StoreKind) async throws {
        let (container, store) = try kind.makeCountingContainer()
        let reader = container.newBackgroundContext(name: "reader")
        try await reader.perform { context in
            context.automaticallyMergesChanges = true
            context.retainsRegisteredObjects = true   // loaded objects the merge must update
            for i in 0..<20 { context.insert(Book(isbn: "\(i)", title: "Old")) }
            try context.save()
        }
        store.reset()
        // Another context changes every book, and lets go of its objects at once.
        try await container.performBackgroundTask { context in
            for book in try context.fetch(FetchRequest<Book>()) { book.title = "New" }
            try context.save()
        }
        let titles = await reader.perform { context in
            context.registeredObjects.compactMap { ($0 as? Book)?.title }
        }
        #expect(titles.count == 20)
        #expect(Set(titles) == ["New"])
        #expect(store.counts.rows == 0)   // the merge read nothing: the save carried its rows
    }
}
