import Dispatch

/// A child context's way to its parent: the parent context and the isolation it must be used on.
///
/// Every use of the parent goes through ``run(_:)``, a synchronous hop recorded in the
/// ``WaitGraph``: it runs the body on the parent's isolation and waits for it, or, when the
/// parent's owner is itself blocked waiting for this child, runs it at once on the child's
/// thread as the parent's code; and it traps on a wait cycle instead of deadlocking.
///
/// `@unchecked Sendable`: `context` is only used inside ``run(_:)``, on the parent's isolation
/// (its queue, or the main queue), or on a thread to which the parent's blocked owner lends that
/// isolation (marked in ``RunningBodies``), never concurrently with the parent's own work.
final class ParentLink: @unchecked Sendable {
    private let context: ManagedObjectContext
    let isolation: ContextIsolation
    let coordinator: PersistentStoreCoordinator

    init(_ context: ManagedObjectContext) {
        self.context = context
        self.isolation = context.isolation
        self.coordinator = context.coordinator
    }

    /// Runs `body` with the parent, on the parent's isolation, and waits for it (Core Data's
    /// `performAndWait` on the parent).
    ///
    /// If the parent waits synchronously (`performAndWait`) for the calling child, the body runs
    /// at once on the caller's thread, borrowing the parent's idle isolation. If the parent waits
    /// for the child from inside one of its own hops, this traps: that wait could never end.
    func run<T: Sendable>(_ body: (ManagedObjectContext) throws(LoomError) -> T) throws(LoomError) -> T {
        if isolation.isCurrent { return try body(context) }
        // The caller waits for the block, so `body` and `context` are never used concurrently.
        nonisolated(unsafe) let body = body
        nonisolated(unsafe) let context = context
        let domain = isolation.domain
        return try WaitGraph.hop(to: domain, named: context.name ?? "unnamed") { () throws(LoomError) -> T in
            try body(context)
        } wait: { () throws(LoomError) -> T in
            let queue: DispatchQueue
            switch isolation {
            case .mainActor: queue = .main
            case .queue(let q): queue = q.queue
            }
            let result = queue.sync {
                RunningBodies.run(as: domain) { Result { () throws(LoomError) -> T in try body(context) } }
            }
            return try result.get()
        }
    }
}
