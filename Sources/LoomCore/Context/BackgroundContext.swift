import Dispatch

/// A context that lives on its own serial queue, wrapped in an actor that owns it.
///
/// Everything done with the context happens inside ``perform(_:)`` (async) or
/// ``performAndWait(_:)`` (synchronous, reentrant), on the context's queue, wherever the
/// background context was created. Only `Sendable` values come out; objects stay inside.
///
/// ```swift
/// let importer = container.newBackgroundContext(name: "import")
/// let count = try await importer.perform { context in
///     for record in records { let p = Package(context: context); p.name = record.name }
///     try context.save()
///     return try context.count(for: FetchRequest<Package>())
/// }
/// ```
public actor BackgroundContext {
    private nonisolated let executor: ContextExecutor
    /// The context. Reachable only on this actor, i.e. inside `perform`.
    public let context: ManagedObjectContext

    /// The context's name, also its queue's label.
    public nonisolated let name: String

    init(coordinator: PersistentStoreCoordinator, name: String, mergesAutomatically: Bool = false, parent: ParentLink? = nil) {
        let queue = ContextQueue(label: name)
        self.executor = ContextExecutor(queue: queue)
        self.name = name
        let context = ManagedObjectContext(coordinator: coordinator, isolation: .queue(queue), name: name, mergesAutomatically: mergesAutomatically, parent: parent)
        self.context = context
        self.link = ParentLink(context)
    }

    /// This context, as a parent for children.
    private nonisolated let link: ParentLink

    /// A new context on its own queue whose parent is this one; see
    /// ``ManagedObjectContext/newChildContext(name:)``. Callable from anywhere.
    public nonisolated func newChildContext(name: String = "Loom child context") -> BackgroundContext {
        BackgroundContext(coordinator: link.coordinator, name: name, parent: link)
    }

    /// A new main-actor context whose parent is this one: the middle level of the classic
    /// writer → main → workers stack. Its saves go to this (private, writer) context; call
    /// `saveRecursively()` on it to reach the store without blocking the main actor on disk for
    /// longer than the writer's save.
    @MainActor public func newMainActorChildContext(name: String = "main context") -> ManagedObjectContext {
        ManagedObjectContext(coordinator: link.coordinator, isolation: .mainActor, name: name, parent: link)
    }

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }

    /// Runs `body` with the context on the context's queue and returns its result.
    ///
    /// Calls are served one at a time, in order. Each ends with
    /// ``ManagedObjectContext/processPendingChanges()``, which posts `objectsDidChange` for what
    /// the body changed.
    public func perform<T: Sendable>(_ body: sending (ManagedObjectContext) throws -> T) rethrows -> T {
        defer { context.processPendingChanges() }
        return try body(context)
    }

    /// Runs `body` with the context on the context's queue, blocking the caller until it is
    /// done. Reentrant: called from inside `perform` or `performAndWait` of the same context,
    /// the body runs at once.
    ///
    /// Never call it from a context that this one waits for: like Core Data's, it can deadlock.
    public nonisolated func performAndWait<T: Sendable>(_ body: sending (ManagedObjectContext) throws -> T) rethrows -> T {
        // `body` was received `sending`: no other isolation domain holds it, and it runs only
        // on this context's queue below, so handing it to the queue's closure is safe.
        nonisolated(unsafe) let body = body
        if executor.queue.isCurrent {
            return try assumeIsolated { actor in try body(actor.context) }
        }
        return try executor.queue.queue.sync {
            try assumeIsolated { actor in
                defer { actor.context.processPendingChanges() }
                return try body(actor.context)
            }
        }
    }
}

/// Runs a background context's jobs on its serial dispatch queue.
final class ContextExecutor: SerialExecutor {
    let queue: ContextQueue

    init(queue: ContextQueue) { self.queue = queue }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.queue.async { job.runSynchronously(on: executor) }
    }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue.queue))
    }

    func isIsolatingCurrentContext() -> Bool? {
        queue.isCurrent
    }
}
