import Foundation
import Loom
import Testing

/// Programmer errors trap with one specific sentence; these exit tests prove that they do.
@Suite("Traps", .ownThreads)
struct TrapTests {
    @Test("Using an object after its context was reset traps")
    func useAfterReset() async {
        await #expect(processExitsWith: .failure) {
            try await MainActor.run {
                let container = try StoreKind.inMemory.makeContainer()
                let book = Book(isbn: "1", title: "Gone")
                container.viewContext.insert(book)
                container.viewContext.reset()
                _ = book.title
            }
        }
    }

    @Test("Using a fault after its context was deallocated traps, naming it")
    func faultAfterContextDeallocated() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let container = try StoreKind.inMemory.makeContainer()
            try container.newBackgroundContext().performAndWait { context in
                context.insert(Book(isbn: "1", title: "Kept"))
                try context.save()
            }
            var background: BackgroundContext? = container.newBackgroundContext(name: "gone")
            let smuggled = try background!.performAndWait { context in
                UnsafeTransfer(try context.fetch(FetchRequest<Book>())[0])   // a fault
            }
            background = nil
            _ = smuggled.value.title
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Book Book/1 was used after its context was deallocated"))
    }

    @Test("Reading a required attribute that was never set traps")
    func unsetRequired() async {
        await #expect(processExitsWith: .failure) {
            try await MainActor.run {
                let container = try StoreKind.inMemory.makeContainer()
                let book = Book(context: container.viewContext)
                _ = book.title
            }
        }
    }

    @Test("An object touched off its context's queue traps, naming entity, object, context, executor and thread")
    func objectOffQueue() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ConcurrencyDebugging.isEnabled = true
            let container = try StoreKind.inMemory.makeContainer()
            let background = container.newBackgroundContext(name: "worker")
            let smuggled = await background.perform { context in
                let book = Book(context: context)
                book.title = "x"
                return UnsafeTransfer(book)
            }
            _ = smuggled.value.title   // on the test's thread, not the context's queue
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Loom concurrency debugging is on"))
        #expect(message.contains("Loom concurrency violation: Book Book/1 in context 'worker'"))
        #expect(message.contains("belongs to queue 'worker'"))
        #expect(message.contains("was used on"))
    }

    @Test("An object released off its context's queue traps instead of racing with the registry")
    func objectReleasedOffQueue() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ConcurrencyDebugging.isEnabled = true
            let container = try StoreKind.inMemory.makeContainer()
            let background = container.newBackgroundContext(name: "releaser")
            var smuggled: UnsafeTransfer<Book>? = try await background.perform { context in
                let book = Book(isbn: "1", title: "x")
                context.insert(book)
                try context.save()              // clean now: only the transfer holds it
                return UnsafeTransfer(book)
            }
            #expect(smuggled != nil)
            smuggled = nil                      // the last reference goes on the test's thread
            withExtendedLifetime(container) {}
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Book"))
        #expect(message.contains("context 'releaser'"))
    }

    @Test("A context called off its queue traps")
    func contextOffQueue() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ConcurrencyDebugging.isEnabled = true
            let container = try StoreKind.inMemory.makeContainer()
            let background = container.newBackgroundContext(name: "importer")
            let smuggled = await background.perform { UnsafeTransfer($0) }
            _ = try smuggled.value.fetch(FetchRequest<Book>())
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("fetch"))
        #expect(message.contains("context 'importer'"))
    }

    @Test("A batched fetch's results read off their context's queue trap")
    func batchedResultsOffQueue() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ConcurrencyDebugging.isEnabled = true
            let container = try StoreKind.inMemory.makeContainer()
            let background = container.newBackgroundContext(name: "batches")
            let smuggled = try await background.perform { context in
                context.insert(Book(isbn: "1", title: "x"))
                try context.save()
                return UnsafeTransfer(try context.fetch(FetchRequest<Book>(), batchSize: 10))
            }
            _ = smuggled.value[0]   // on the test's thread, not the context's queue
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("FetchResultsCollection"))
        #expect(message.contains("context 'batches'"))
    }

    @Test("The view context used off the main thread traps")
    func viewContextOffMain() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            ConcurrencyDebugging.isEnabled = true
            let container = try StoreKind.inMemory.makeContainer()
            let smuggled = await MainActor.run { UnsafeTransfer(container.viewContext) }
            await Task.detached { _ = smuggled.value.hasChanges }.value
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("context 'view context'"))
        #expect(message.contains("belongs to the main actor"))
    }

    @Test("With checks off, the same misuse does not trap (the check costs one atomic load)")
    func offByDefault() async {
        await #expect(processExitsWith: .success) {
            let container = try! StoreKind.inMemory.makeContainer()
            let background = container.newBackgroundContext(name: "worker")
            let smuggled = await background.perform { context in
                let book = Book(context: context)
                book.title = "x"
                return UnsafeTransfer(book)
            }
            _ = await background.perform { _ in smuggled.value.title }   // fine: back on its queue
            #expect(!ConcurrencyDebugging.isEnabled)
        }
    }
}

/// Smuggles a non-Sendable value across isolation, as careless code might.
struct UnsafeTransfer<T>: @unchecked Sendable {   // deliberately unsafe: the test proves the run-time check catches it
    let value: T
    init(_ value: T) { self.value = value }
}
