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

    /// Creates a container around an open store.
    public init(store: any PersistentStore) {
        self.coordinator = PersistentStoreCoordinator(store: store)
        self.viewContextBox = ViewContextBox(coordinator: coordinator)
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

    /// Closes the store. Contexts must not be used afterwards.
    public func close() throws(LoomError) {
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
        let context = ManagedObjectContext(coordinator: coordinator, isolation: .mainActor, name: "view context")
        storage = context
        return context
    }
}
