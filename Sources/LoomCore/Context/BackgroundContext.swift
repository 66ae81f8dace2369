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
    /// Callable from any isolation, the main actor included. While the caller waits, this
    /// context's children may still reach the caller's context if it is their parent: a child of
    /// the view context can be used with `performAndWait` from the main actor, and its fetches,
    /// faults and saves run the parent's part on the child's queue, since the parent's isolation
    /// is idle while its owner waits.
    ///
    /// Never wait synchronously for a context that is itself waiting for the caller, e.g. a child
    /// in the middle of a fetch that needs its parent: Loom traps at once with a message naming
    /// both contexts ("Loom deadlock: ..."), where Core Data would deadlock. Use `await perform`
    /// to wait for a child from its parent's isolation when the child may be busy.
    public nonisolated func performAndWait<T: Sendable>(_ body: sending (ManagedObjectContext) throws -> T) rethrows -> T {
        // `body` was received `sending`: no other isolation domain holds it, and it runs only
        // on this context's queue below, so handing it to the queue's closure is safe.
        nonisolated(unsafe) let body = body
        let queue = executor.queue
        if queue.isCurrent {
            return try assumeIsolated { actor in try body(actor.context) }
        }
        return try WaitGraph.performAndWait(on: queue.domain, named: name) {
            try queue.queue.sync {
                try RunningBodies.run(as: queue.domain) {
                    try assumeIsolated { actor in
                        defer { actor.context.processPendingChanges() }
                        return try body(actor.context)
                    }
                }
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
        if !queue.isCurrent { fatalError("Loom: code isolated to \(queue.domain) ran on \(IsolationDomain.describeCurrent()).") }
    }

    func isIsolatingCurrentContext() -> Bool? {
        queue.isCurrent
    }
}
