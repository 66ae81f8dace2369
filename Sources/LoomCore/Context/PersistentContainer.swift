import Foundation

/// The Loom stack in one object: a coordinator over one store, the main-actor view context,
/// and background contexts on demand.
///
/// ```swift
/// let container = try PersistentContainer(for: Book.self, store: .inMemory)
/// try await container.performBackgroundTask { context in
///     let book = Book(context: context)
///     book.title = "Threads"
///     try context.save()
/// }
/// ```
/// Build the SQLite-backed container with `PersistentContainer(name:for:)` from the Loom module.
public final class PersistentContainer: Sendable {
    /// The coordinator shared by every context of this container.
    public let coordinator: PersistentStoreCoordinator
    private let viewContextBox: ViewContextBox

    /// The dedicated serial writer behind ``save(mergingIntoViewContext:_:)``.
    private let writer: BackgroundContext
    /// Whether ``close()`` was called, the helper calls running, and the closes waiting for them.
    private let lifecycle = Locked(Lifecycle())

    private struct Lifecycle {
        var isClosed = false
        var running = 0
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Creates a container around an open store.
    public init(store: any PersistentStore) {
        self.coordinator = PersistentStoreCoordinator(store: store)
        self.viewContextBox = ViewContextBox(coordinator: coordinator)
        self.writer = BackgroundContext(coordinator: coordinator, name: "Loom writer")
    }

    /// Creates a container with an ``InMemoryStore`` for these model types.
    public convenience init(inMemoryFor types: any PersistentModel.Type...) throws(LoomError) {
        self.init(store: InMemoryStore(schema: try Schema(types)))
    }

    /// The model.
    public var schema: Schema { coordinator.schema }

    /// The context for the main actor (UI, or a command-line program's main flow). Created on
    /// first use.
    @MainActor public var viewContext: ManagedObjectContext { viewContextBox.context }

    /// A new context on its own serial queue; see ``BackgroundContext``.
    public func newBackgroundContext(name: String = "Loom background context") -> BackgroundContext {
        BackgroundContext(coordinator: coordinator, name: name)
    }

    /// Runs `body` with a fresh background context on its own queue and returns its `Sendable`
    /// result. The context is discarded afterwards: save inside `body` to keep changes.
    ///
    /// Rethrows what `body` throws, unchanged. A task started before ``close()`` finishes before
    /// the store closes; one started after it throws ``LoomError/Code/closed``.
    public func performBackgroundTask<T: Sendable>(_ body: sending @escaping (ManagedObjectContext) throws -> T) async throws -> T {
        try begin()
        defer { end() }
        let background = newBackgroundContext(name: "Loom background task")
        return try await background.perform(body)
    }

    /// Runs `body` on the container's one dedicated serial writer, saves, and returns its
    /// `Sendable` result only after the save committed **and** the view context merged it, so
    /// that the caller can use the result on the main actor at once.
    ///
    /// ```swift
    /// let id = try await container.save { context in
    ///     let book = Book(context: context)
    ///     book.title = "Threads"
    ///     return book.objectID
    /// }
    /// let book = try container.viewContext.existingObject(with: id)   // already merged
    /// ```
    ///
    /// Saves through this helper run one at a time, in order. If `body` throws or the save fails,
    /// its changes are discarded and the error is rethrown unchanged (your own error comes back
    /// as it was thrown). The writer's context starts empty for every call. A save asked for
    /// before ``close()`` finishes before the store closes; one asked for after it throws
    /// ``LoomError/Code/closed``.
    ///
    /// - Parameters:
    ///   - mergingIntoViewContext: pass `false` to keep this save out of the view
    ///     context (MagicalRecord's "save without merging"); other contexts still merge it.
    ///   - body: the changes to make, on the writer's context; what it returns is returned.
    public func save<T: Sendable>(mergingIntoViewContext: Bool = true, _ body: sending @escaping (ManagedObjectContext) throws -> T) async throws -> T {
        try begin()
        defer { end() }
        let result = try await writer.perform { context in
            defer {
                context.reset()
                context.transactionAuthor = nil   // the next call starts as a fresh context
            }
            do {
                let value = try body(context)
                try context.save(mergingIntoViewContext: mergingIntoViewContext)
                return value
            } catch {
                context.rollback()
                throw error
            }
        }
        if mergingIntoViewContext {
            await MainActor.run { viewContextBox.context.mergePendingSaves() }
        }
        return result
    }

    /// The completion-handler form of ``save(mergingIntoViewContext:_:)``: `completion` is
    /// called on the main actor after the commit and the view context's merge.
    public func save<T: Sendable>(
        mergingIntoViewContext: Bool = true, _ body: sending @escaping (ManagedObjectContext) throws -> T,
        completion: @escaping @MainActor @Sendable (Result<T, any Error>) -> Void
    ) {
        // `body` was received `sending`: nothing else holds it; the task below is its only user.
        nonisolated(unsafe) let body = body
        Task {
            let result: Result<T, any Error>
            do { result = .success(try await save(mergingIntoViewContext: mergingIntoViewContext, body)) } catch { result = .failure(error) }
            await MainActor.run { completion(result) }
        }
    }

    /// Runs `body` on the writer inside one store write transaction, and saves before it
    /// commits: no other save — of this container, another container or another process on the
    /// same store — can commit between what `body` reads and what it writes, so a
    /// read-modify-write needs no conflict handling.
    ///
    /// ```swift
    /// try await container.performExclusiveWrite { context in
    ///     let counter = try context.fetch(FetchRequest<Counter>()).first!
    ///     counter.value += 1
    /// }
    /// ```
    /// What `body` fetches sees the store inside the transaction (its own saves included). Keep
    /// `body` short: every other save waits for it, and never make it wait for another
    /// context's save (that save waits for this one). Readers never wait: until the commit,
    /// other contexts read the store as it was before (not even a fault sees `body`'s saves
    /// early), and after it nothing they read during the transaction is served to them as
    /// current. If `body` throws, nothing is written, other contexts hear of nothing, and its
    /// error is rethrown unchanged.
    /// Like ``save(mergingIntoViewContext:_:)``, it finishes before a ``close()`` asked for
    /// after it, and throws ``LoomError/Code/closed`` when asked for after one.
    public func performExclusiveWrite<T: Sendable>(_ body: sending @escaping (ManagedObjectContext) throws -> T) async throws -> T {
        try begin()
        defer { end() }
        let coordinator = self.coordinator
        let result = try await writer.perform { context in
            defer {
                context.reset()
                context.transactionAuthor = nil   // the next call starts as a fresh context
            }
            do {
                return try coordinator.write(.exclusive) { () throws -> T in
                    let value = try body(context)
                    try context.save()
                    return value
                }.value
            } catch {
                context.rollback()
                throw error
            }
        }
        await MainActor.run { viewContextBox.context.mergePendingSaves() }
        return result
    }

    /// Counts a helper call as running, or throws ``LoomError/Code/closed`` after ``close()``.
    private func begin() throws(LoomError) {
        let isOpen = lifecycle.withLock { state -> Bool in
            if state.isClosed { return false }
            state.running += 1
            return true
        }
        if !isOpen {
            throw LoomError(.closed, "The container was closed; open a new one to save again.")
        }
    }

    /// A helper call is done: the last one lets a waiting ``close()`` go on.
    private func end() {
        let waiters = lifecycle.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.closeWaiters = [] }
            return state.closeWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Closes the store once the saves in flight finish.
    ///
    /// ```swift
    /// try await container.close()
    /// ```
    ///
    /// Every ``save(mergingIntoViewContext:_:)``, ``performExclusiveWrite(_:)`` and
    /// ``performBackgroundTask(_:)`` asked for before the close runs to its end first (queued
    /// ones included), and a context's ``ManagedObjectContext/save()`` that is running
    /// completes: their saves are durable. Afterwards every save — of the view context, of a
    /// background context, or through the helpers — and every read of the store throws
    /// ``LoomError/Code/closed``. Closing again does nothing. Call it from any isolation; it
    /// suspends, never blocking the main actor while helper saves finish.
    ///
    /// - Throws: the store's error if it cannot be closed.
    public func close() async throws {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let resumeNow = lifecycle.withLock { state -> Bool in
                state.isClosed = true
                if state.running == 0 { return true }
                state.closeWaiters.append(waiter)
                return false
            }
            if resumeNow { waiter.resume() }
        }
        // The store waits for a write in progress (a context's save) before it closes.
        defer { coordinator.finishRemoteChanges() }
        try coordinator.store.close()
    }

    /// What other containers and processes commit to this container's store, in commit order,
    /// as they commit it (see ``PersistentStoreCoordinator/remoteChanges()``): the view context
    /// and every background context with automatic merging already merge them; this stream is
    /// for code that reacts to them. It ends when the container closes.
    ///
    /// ```swift
    /// for await change in container.remoteChanges() {
    ///     print("\(change.transactions.count) transactions by others, up to \(change.token!)")
    /// }
    /// ```
    ///
    /// Callable from any isolation.
    public func remoteChanges() -> AsyncStream<RemoteChangeEvent> {
        coordinator.remoteChanges()
    }
}

/// Holds the view context on the main actor.
@MainActor
final class ViewContextBox {
    private let coordinator: PersistentStoreCoordinator
    private var storage: ManagedObjectContext?

    nonisolated init(coordinator: PersistentStoreCoordinator) {
        self.coordinator = coordinator
    }

    var context: ManagedObjectContext {
        if let storage { return storage }
        let context = ManagedObjectContext(coordinator: coordinator, isolation: .mainActor, name: "view context", mergesAutomatically: true, isViewContext: true)
        storage = context
        return context
    }
}
