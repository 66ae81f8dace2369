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
    private let closed = Locked(false)

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
    public func performBackgroundTask<T: Sendable>(_ body: sending @escaping (ManagedObjectContext) throws -> T) async throws -> T {
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
    /// its changes are discarded and the error is rethrown. The writer's context starts empty for
    /// every call.
    ///
    /// - Parameter mergingIntoViewContext: pass `false` to keep this save out of the view
    ///   context (MagicalRecord's "save without merging"); other contexts still merge it.
    public func save<T: Sendable>(mergingIntoViewContext: Bool = true, _ body: sending @escaping (ManagedObjectContext) throws -> T) async throws -> T {
        try checkOpen()
        let result = try await writer.perform { context in
            defer { context.reset() }
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
    /// context's save (that save waits for this one). Readers never wait. If `body` throws,
    /// nothing is written and its error is rethrown unchanged.
    public func performExclusiveWrite<T: Sendable>(_ body: sending @escaping (ManagedObjectContext) throws -> T) async throws -> T {
        try checkOpen()
        let coordinator = self.coordinator
        let result = try await writer.perform { context in
            defer { context.reset() }
            do {
                return try coordinator.performExclusiveWrite { () throws -> T in
                    let value = try body(context)
                    try context.save()
                    return value
                }
            } catch {
                context.rollback()
                throw error
            }
        }
        await MainActor.run { viewContextBox.context.mergePendingSaves() }
        return result
    }

    private func checkOpen() throws(LoomError) {
        if closed.withLock({ $0 }) {
            throw LoomError(.closed, "The container was closed; open a new one to save again.")
        }
    }

    /// Closes the store after the saves in flight finish: saves already running complete and
    /// are durable; saves asked for afterwards fail with ``LoomError/Code/closed``.
    public func close() async throws {
        closed.withLock { $0 = true }
        // Saves queued on the writer before the close run first.
        await writer.perform { _ in }
        try coordinator.store.close()
    }

    /// Closes the store, waiting for a save that is running to finish. From async code prefer
    /// the async `close()`, which also lets queued saves of the ``save(mergingIntoViewContext:_:)``
    /// helper finish.
    public func close() throws(LoomError) {
        closed.withLock { $0 = true }
        try coordinator.store.close()
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
