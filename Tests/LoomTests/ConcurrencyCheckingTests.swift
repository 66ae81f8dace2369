import Foundation
import Loom
import Testing

/// With `LOOM_CONCURRENCY_DEBUG` on, correct code runs to the end: the checker knows the main
/// actor by its queue, not by its thread. Each test turns the checks on in a child process, so
/// the setting does not leak into other tests.
@Suite("Concurrency checking accepts correct code")
struct ConcurrencyCheckingTests {
    @Test("The view context used on the main actor passes the checks: fetch, insert, save, accessors, merges, the save helper")
    func viewContextOnTheMainActor() async {
        await #expect(processExitsWith: .success) {
            ConcurrencyDebugging.isEnabled = true
            for kind in StoreKind.allCases { try await CorrectUse.viewContextOnTheMainActor(kind) }
        }
    }

    @Test("Background contexts used through perform and performAndWait pass the checks")
    func backgroundContexts() async {
        await #expect(processExitsWith: .success) {
            ConcurrencyDebugging.isEnabled = true
            for kind in StoreKind.allCases { try await CorrectUse.backgroundContexts(kind) }
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

    @MainActor
    private static func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<1000 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
        #expect(condition())
    }
}
