import Foundation
import Loom
import Testing

/// Programmer errors trap with one specific sentence; these exit tests prove that they do.
@Suite("Traps")
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

    @Test("Touching a background context's object off its queue traps with concurrency debugging on")
    func concurrencyViolation() async {
        await #expect(processExitsWith: .failure) {
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
    }
}

/// Smuggles a non-Sendable value across isolation, as careless code might.
struct UnsafeTransfer<T>: @unchecked Sendable {   // deliberately unsafe: the test proves the run-time check catches it
    let value: T
    init(_ value: T) { self.value = value }
}
