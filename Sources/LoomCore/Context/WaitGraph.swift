/// Who waits synchronously for whom: every `performAndWait` and every child's hop to its parent
/// records, for as long as it blocks, that the calling domain waits for the target's domain.
///
/// Two rules follow from it, both decided under one lock before anything blocks:
///
/// - **A wait cycle traps.** When domain X is about to wait for domain Y while Y (transitively)
///   waits for X, Loom traps at once with one sentence naming both contexts, instead of
///   deadlocking (or crashing inside libdispatch when both are the same thread's queue).
/// - **A parent blocked on its child is lent to the child.** When a child hops to its parent
///   while the parent's owner is blocked in `performAndWait` waiting (transitively) for that
///   child, the parent can do nothing until the child is done: its isolation is provably idle.
///   The hop then runs the parent's body on the child's thread, with the parent's domain marked
///   as running there (``RunningBodies``), so that the concurrency checker accepts it. This is
///   Core Data's `performAndWait` reentrancy, and what lets the main actor `performAndWait` on a
///   child of the view context. The parent is lent only when its owner waits in user code
///   (`performAndWait`), never when it waits inside one of its own hops, since it is then in
///   the middle of a Loom operation.
enum WaitGraph {
    enum Kind: Equatable {
        /// A `performAndWait` from user code: the waiter stands at a point its own code chose.
        case performAndWait
        /// A child's hop to its parent, from inside one of the child's operations.
        case parentHop
        /// A child running its parent's body itself, because the parent waits for the child.
        case borrowed
    }

    struct Edge: Equatable {
        let waiter: IsolationDomain
        let target: IsolationDomain
        /// The name of the context waited for, for messages.
        let targetName: String
        let kind: Kind
    }

    private static let edges = Locked<[Edge]>([])

    /// Runs `wait`, which blocks until a body has run on `target`, recorded as the current
    /// domain waiting for it; traps if `target` already waits (transitively) for the caller.
    static func performAndWait<T, E: Error>(on target: IsolationDomain, named name: String, _ wait: () throws(E) -> T) throws(E) -> T {
        guard let waiter = IsolationDomain.current else { return try wait() }   // nothing can wait for a plain thread
        let edge = Edge(waiter: waiter, target: target, targetName: name, kind: .performAndWait)
        let cycle: [Edge]? = edges.withLock { edges in
            if let path = path(from: target, to: waiter, in: edges) { return path }
            edges.append(edge)
            return nil
        }
        if let cycle { fatalError(deadlockMessage(waitingFor: name, cycle: cycle)) }
        defer { remove(edge) }
        return try wait()
    }

    /// A child's hop to its parent: runs `borrow` at once on this thread as the parent's code if
    /// the parent is blocked in `performAndWait` waiting for the caller; otherwise runs `wait`,
    /// which blocks until the body has run on the parent's isolation. Traps if the parent waits
    /// for the caller from inside one of its own operations.
    static func hop<T, E: Error>(to parent: IsolationDomain, named name: String, borrow: () throws(E) -> T, wait: () throws(E) -> T) throws(E) -> T {
        guard let child = IsolationDomain.current else { return try wait() }
        let lent = Edge(waiter: child, target: parent, targetName: name, kind: .borrowed)
        let waiting = Edge(waiter: child, target: parent, targetName: name, kind: .parentHop)
        let cycle: [Edge]? = edges.withLock { edges in
            guard let path = path(from: parent, to: child, in: edges) else {
                edges.append(waiting)
                return nil
            }
            if path[0].kind == .performAndWait { edges.append(lent) }
            return path
        }
        guard let cycle else {
            defer { remove(waiting) }
            return try wait()
        }
        guard cycle[0].kind == .performAndWait else {
            fatalError("Loom deadlock: context '\(cycle[cycle.count - 1].targetName)' needs its parent '\(name)', which is waiting for it from inside a Loom operation (\(chain(cycle))). Do not make a context wait synchronously (performAndWait) for its descendants while they may be reaching it.")
        }
        defer { remove(lent) }
        return try RunningBodies.run(as: parent, borrow)
    }

    private static func remove(_ edge: Edge) {
        edges.withLock { edges in
            if let i = edges.lastIndex(of: edge) { edges.remove(at: i) }
        }
    }

    /// The edges by which `start` waits, directly or through other domains, for `goal`.
    private static func path(from start: IsolationDomain, to goal: IsolationDomain, in edges: [Edge]) -> [Edge]? {
        guard !edges.isEmpty else { return nil }
        var visited: Set<IsolationDomain> = [start]
        var stack: [(IsolationDomain, [Edge])] = [(start, [])]
        while let (domain, path) = stack.popLast() {
            for edge in edges where edge.waiter == domain {
                let next = path + [edge]
                if edge.target == goal { return next }
                if visited.insert(edge.target).inserted { stack.append((edge.target, next)) }
            }
        }
        return nil
    }

    private static func chain(_ path: [Edge]) -> String {
        path.map { "\($0.waiter) waits for '\($0.targetName)'" }.joined(separator: ", ")
    }

    private static func deadlockMessage(waitingFor name: String, cycle: [Edge]) -> String {
        let waiter = cycle[cycle.count - 1].targetName
        if cycle.count == 1, cycle[0].kind == .parentHop {
            return "Loom deadlock: context '\(waiter)' waits synchronously for its child '\(name)', which is waiting for it; a parent must never wait synchronously (performAndWait) for its child: use `await perform`, or do the work in the parent."
        }
        return "Loom deadlock: context '\(waiter)' waits synchronously for '\(name)', which is waiting for it (\(chain(cycle))); make one of these waits asynchronous (`await perform`)."
    }
}
