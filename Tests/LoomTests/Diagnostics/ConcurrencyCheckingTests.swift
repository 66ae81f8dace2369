import Foundation
import Loom
import Testing

/// With `LOOM_CONCURRENCY_DEBUG` on, correct code runs to the end: the checker knows the main
/// actor by its queue, not by its thread, and accepts a parent lent to its child while the
/// parent's owner waits for that child. Each test turns the checks on in a child process, so the
/// setting does not leak into other tests.
@Suite("Concurrency checking accepts correct code", .ownThreads)
struct ConcurrencyCheckingTests {
    @Test("The view context used on the main actor passes the checks: fetch, insert, save, accessors, merges, the save helper")
    func viewContextOnTheMainActor() async {
        await #expect(processExitsWith: .success) {
            ConcurrencyDebugging.isEnabled = true
            for kind in StoreKind.availableCases { try await CorrectUse.viewContextOnTheMainActor(kind) }
        }
    }

    @Test("Background contexts used through perform and performAndWait pass the checks")
    func backgroundContexts() async {
        await #expect(processExitsWith: .success) {
            ConcurrencyDebugging.isEnabled = true
            for kind in StoreKind.availableCases { try await CorrectUse.backgroundContexts(kind) }
        }
    }

    @Test("Child contexts of the view context and of background contexts pass the checks, waited for or awaited")
    func childContexts() async {
        await #expect(processExitsWith: .success) {
            ConcurrencyDebugging.isEnabled = true
            for kind in StoreKind.availableCases {
                try await CorrectUse.childOfViewContext(kind)
                try await CorrectUse.childOfBackgroundContext(kind)
                try await CorrectUse.writerMainWorkerStack(kind)
            }
        }
    }

    @Test("A background object touched on the main actor traps, and the message says it was the main actor")
    func violationNamesTheMainActor() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ConcurrencyDebugging.isEnabled = true
            let container = try StoreKind.inMemory.makeContainer()
            let background = container.newBackgroundContext(name: "worker")
            let smuggled = await background.perform { context in
                let book = Book(isbn: "1", title: "x")
                context.insert(book)
                return UnsafeTransfer(book)
            }
            await MainActor.run { _ = smuggled.value.title }
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Loom concurrency violation: Book Book/1 in context 'worker' was used on the main actor"))
        #expect(message.contains("belongs to queue 'worker'"))
    }
}

/// A wait that could never end traps at once, naming both contexts.
@Suite("Deadlock traps", .ownThreads)
struct DeadlockTrapTests {
    @Test("A background parent waiting synchronously for its child, while the child waits for it, traps")
    func backgroundParentWaitsForBusyChild() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let container = try StoreKind.inMemory.makeContainer()
            let parent = container.newBackgroundContext(name: "parent")
            let child = parent.newChildContext(name: "child")
            let parentBusy = DispatchSemaphore(value: 0), childStarted = DispatchSemaphore(value: 0)
            async let waiting: Void = parent.perform { _ in
                parentBusy.signal()
                childStarted.wait()
                Thread.sleep(forTimeInterval: 0.3)   // the child is now blocked in its hop to this context
                child.performAndWait { _ in }
            }
            async let fetching: Int = child.perform { context in
                parentBusy.wait()
                childStarted.signal()
                return try context.count(for: FetchRequest<Book>())   // needs the parent, which is busy
            }
            _ = try await (waiting, fetching)
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Loom deadlock: context 'parent' waits synchronously for its child 'child', which is waiting for it"))
    }

    @Test("The view context waiting synchronously for its child, while the child waits for it, traps")
    func viewContextWaitsForBusyChild() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            try await CorrectUse.viewContextWaitsForBusyChild()
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Loom deadlock: context 'view context' waits synchronously for its child 'child', which is waiting for it"))
    }

    @Test("Two contexts waiting synchronously for each other trap")
    func performAndWaitCycle() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let container = try StoreKind.inMemory.makeContainer()
            let first = container.newBackgroundContext(name: "first"), second = container.newBackgroundContext(name: "second")
            first.performAndWait { _ in
                second.performAndWait { _ in
                    first.performAndWait { _ in }
                }
            }
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Loom deadlock: context 'second' waits synchronously for 'first', which is waiting for it"))
    }
}

/// Correct uses of contexts, run by the exit tests above with the checks on.
enum CorrectUse {
    @MainActor
    static func viewContextOnTheMainActor(_ kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        let book = Book(isbn: "1", title: "On main", pages: 1)
        view.insert(book)
        try view.save()
        book.pages += 1
        #expect(try view.fetch(FetchRequest<Book>()).map(\.title) == ["On main"])
        try view.save()
        let id = book.objectID

        // A background save reaches the view context through a merge delivered by
        // `Task { @MainActor }`, which touches the registered object on the main actor.
        try await container.newBackgroundContext(name: "editor").perform { context in
            try context.existingObject(with: id).title = "Edited in background"
            try context.save()
        }
        try await waitUntil { book.title == "Edited in background" }

        let saved = try await container.save { context in
            let book = Book(isbn: "2", title: "Through the save helper")
            context.insert(book)
            return book.objectID
        }
        #expect(try view.existingObject(with: saved).title == "Through the save helper")
        #expect(try view.count(for: FetchRequest<Book>()) == 2)
        try await container.close()
    }

    @MainActor
    static func backgroundContexts(_ kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let background = container.newBackgroundContext(name: "background")
        let id = try await background.perform { context in
            let book = Book(isbn: "1", title: "Awaited")
            context.insert(book)
            try context.save()
            return book.objectID
        }
        // performAndWait from the main actor, from a detached task, and nested in a perform.
        let title = try background.performAndWait { context in try context.existingObject(with: id).title }
        #expect(title == "Awaited")
        let pages = try await Task.detached {
            try background.performAndWait { context in
                let book = try context.existingObject(with: id)
                book.pages = 7
                try context.save()
                return book.pages
            }
        }.value
        #expect(pages == 7)
        let other = container.newBackgroundContext(name: "other")
        let count = try await other.perform { context in
            let mine = try context.count(for: FetchRequest<Book>())
            return try mine + background.performAndWait { try $0.count(for: FetchRequest<Book>()) }
        }
        #expect(count == 2)
        try await container.close()
    }

    /// A child of the view context, used from the main actor with `performAndWait` (its hops run
    /// on the view context lent by the waiting main actor) and with `await perform`.
    @MainActor
    static func childOfViewContext(_ kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        let saved = Book(isbn: "1", title: "Saved", pages: 1)
        view.insert(saved)
        try view.save()
        view.insert(Book(isbn: "2", title: "Unsaved"))
        let id = saved.objectID
        let child = view.newChildContext(name: "child")

        let seen = try child.performAndWait { context in
            let titles = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title)
            try context.existingObject(with: id).pages = 2
            context.insert(Book(isbn: "3", title: "From the child"))
            try context.save()
            return titles
        }
        #expect(seen == ["Saved", "Unsaved"])
        #expect(saved.pages == 2)
        #expect(try view.count(for: FetchRequest<Book>()) == 3)

        let awaited = try await child.perform { context in
            try context.existingObject(with: id).title = "Edited by the child"
            try context.save()
            return try context.count(for: FetchRequest<Book>())
        }
        #expect(awaited == 3)
        #expect(saved.title == "Edited by the child")
        try child.performAndWait { context in try context.saveRecursively() }   // child → view → store
        #expect(!view.hasChanges)
        let stored = try await container.newBackgroundContext().perform { try $0.count(for: FetchRequest<Book>()) }
        #expect(stored == 3)
        try await container.close()
    }

    /// A background parent that waits synchronously for its idle child: the child's hops borrow
    /// the waiting parent.
    static func childOfBackgroundContext(_ kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let parent = container.newBackgroundContext(name: "parent")
        let child = parent.newChildContext(name: "child")
        let seen = try await parent.perform { context in
            context.insert(Book(isbn: "1", title: "Unsaved in the parent"))
            return try child.performAndWait { child in
                child.insert(Book(isbn: "2", title: "From the child"))
                try child.save()
                return try child.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.isbn)])).map(\.title)
            }
        }
        #expect(seen == ["Unsaved in the parent", "From the child"])
        let awaited = try await child.perform { try $0.count(for: FetchRequest<Book>()) }
        #expect(awaited == 2)
        let inParent = try parent.performAndWait { context in
            try child.performAndWait { try $0.count(for: FetchRequest<Book>()) } + context.count(for: FetchRequest<Book>())
        }
        #expect(inParent == 4)
        try await container.close()
    }

    /// writer (private) → main (main actor) → worker (private), used from the main actor.
    @MainActor
    static func writerMainWorkerStack(_ kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let writer = container.newBackgroundContext(name: "writer")
        let main = writer.newMainActorChildContext()
        let worker = main.newChildContext(name: "worker")
        main.insert(Book(isbn: "1", title: "Unsaved in main"))

        let id = try worker.performAndWait { context in
            #expect(try context.count(for: FetchRequest<Book>()) == 1)
            let book = Book(isbn: "2", title: "From the worker")
            context.insert(book)
            try context.saveRecursively()           // worker → main → writer → store
            return book.objectID
        }
        #expect(try main.existingObject(with: id).title == "From the worker")
        #expect(!main.hasChanges)
        let faulted = try await worker.perform { context in
            let book = try context.existingObject(with: id)
            book.pages = 3
            try context.save()
            return book.title
        }
        #expect(faulted == "From the worker")
        #expect(try main.existingObject(with: id).pages == 3)
        try main.saveRecursively()
        let stored = try await container.newBackgroundContext().perform { try $0.existingObject(with: id).pages }
        #expect(stored == 3)
        try await container.close()
    }

    /// Blocks the main actor until a child of the view context is inside a `perform` that needs
    /// the view context, then waits synchronously for the child: a wait that can never end.
    @MainActor
    static func viewContextWaitsForBusyChild() async throws {
        let container = try StoreKind.inMemory.makeContainer()
        let child = container.viewContext.newChildContext(name: "child")
        let childStarted = DispatchSemaphore(value: 0)
        let fetching = Task.detached {
            try await child.perform { context in
                childStarted.signal()
                return try context.count(for: FetchRequest<Book>())   // needs the view context
            }
        }
        childStarted.wait()
        usleep(300_000)   // the child is now blocked in its hop to the main actor
        child.performAndWait { _ in }
        _ = try await fetching.value
    }

    @MainActor
    private static func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<1000 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
        #expect(condition())
    }
}
