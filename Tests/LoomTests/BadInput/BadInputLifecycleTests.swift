import Foundation
import Loom
import Testing

/// The bad-input catalogue (`Loom.docc/BadInput.md`): a container, its contexts and its store
/// used after `close()`, and a context used after its container is gone. Each use after close
/// throws ``LoomError/Code/closed`` naming the store; what was saved before stays, whole.
@Suite("Bad input: use after close", .timeLimit(.minutes(5)))
struct BadInputLifecycleTests {
    /// A fixture whose container is closed, with a background context made before the close.
    func closedFixture(_ kind: StoreKind) async throws -> (BadInputFixture, BackgroundContext, [String]) {
        let fixture = try await BadInputFixture.make(kind)
        let context = fixture.container.newBackgroundContext(name: "kept")
        let before = try await fixture.contents()
        try await fixture.container.close()
        return (fixture, context, before)
    }

    /// Runs `body` on `context`, which must throw ``LoomError/Code/closed``; then checks what
    /// the store holds through a new container.
    func expectClosed(_ fixture: BadInputFixture, _ context: BackgroundContext, before: [String],
                      sourceLocation: SourceLocation = #_sourceLocation,
                      _ body: @escaping @Sendable (ManagedObjectContext) throws -> Void) async throws {
        let error = await #expect(throws: LoomError.self, sourceLocation: sourceLocation) {
            try await context.perform { try body($0) }
        }
        #expect(error?.code == .closed, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.message.contains("closed") == true, sourceLocation: sourceLocation)
        #expect(try await fixture.contentsReopened() == before, sourceLocation: sourceLocation)
    }

    @Test("A save after close is closed, and the unsaved change is not written", arguments: StoreKind.persistentCases)
    func saveAfterClose(kind: StoreKind) async throws {
        let (fixture, context, before) = try await closedFixture(kind)
        try await expectClosed(fixture, context, before: before) { context in
            context.insert(Book(isbn: "978-4", title: "Too late"))
            try context.save()
        }
    }

    @Test("A fetch after close is closed", arguments: StoreKind.persistentCases)
    func fetchAfterClose(kind: StoreKind) async throws {
        let (fixture, context, before) = try await closedFixture(kind)
        try await expectClosed(fixture, context, before: before) { context in
            _ = try context.fetch(FetchRequest<Book>())
        }
    }

    @Test("A count after close is closed", arguments: StoreKind.persistentCases)
    func countAfterClose(kind: StoreKind) async throws {
        let (fixture, context, before) = try await closedFixture(kind)
        try await expectClosed(fixture, context, before: before) { context in
            _ = try context.count(for: FetchRequest<Book>())
        }
    }

    @Test("A batch delete after close is closed, deleting nothing", arguments: StoreKind.persistentCases)
    func batchDeleteAfterClose(kind: StoreKind) async throws {
        let (fixture, context, before) = try await closedFixture(kind)
        try await expectClosed(fixture, context, before: before) { context in
            _ = try context.execute(BatchDeleteRequest<Book>())
        }
    }

    @Test("A history fetch after close is closed", arguments: StoreKind.persistentCases)
    func historyAfterClose(kind: StoreKind) async throws {
        let (fixture, context, before) = try await closedFixture(kind)
        try await expectClosed(fixture, context, before: before) { context in
            _ = try context.fetchHistory(HistoryDescriptor())
        }
    }

    @Test("performBackgroundTask after close is closed", arguments: StoreKind.persistentCases)
    func backgroundTaskAfterClose(kind: StoreKind) async throws {
        let (fixture, _, before) = try await closedFixture(kind)
        let error = await #expect(throws: LoomError.self) {
            try await fixture.container.performBackgroundTask { context in
                context.insert(Book(isbn: "978-4", title: "Too late"))
                try context.save()
            }
        }
        #expect(error?.code == .closed, "\(String(describing: error))")
        #expect(try await fixture.contentsReopened() == before)
    }

    @Test("Closing twice does nothing, and the store reopens whole", arguments: StoreKind.persistentCases)
    func closeTwice(kind: StoreKind) async throws {
        let (fixture, _, before) = try await closedFixture(kind)
        try await fixture.container.close()
        #expect(try await fixture.contentsReopened() == before)
    }

    @Test("A context kept after its container is released still reads and saves", arguments: StoreKind.allCases)
    func contextOutlivesContainer(kind: StoreKind) async throws {
        var fixture: BadInputFixture? = try await BadInputFixture.make(kind)
        let context = try #require(fixture).container.newBackgroundContext(name: "orphan")
        fixture = nil
        let titles = try await context.perform { context in
            context.insert(Book(isbn: "978-4", title: "Orphaned"))
            try context.save()
            return try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\Book.isbn)])).map(\.title)
        }
        #expect(titles == ["Dune", "Emma", "Orphaned"])
    }
}
