import Foundation

extension ManagedObjectContext {
    /// Where this context's rows come from (see ``RowSource``).
    var rowSource: RowSource { RowSource(context: self) }

    // MARK: Child contexts

    /// A new context on its own queue whose parent is this context: its fetches and faults see
    /// this context's unsaved changes, and its `save()` pushes its changes here (one level up),
    /// not to the store. Use it as a scratchpad: discard it to cancel, save it to keep.
    ///
    /// ```swift
    /// let editor = container.viewContext.newChildContext(name: "editor")
    /// try await editor.perform { context in
    ///     try context.existingObject(with: id).title = "Draft"
    ///     try context.save()             // now an unsaved change of the view context
    /// }
    /// ```
    ///
    /// Call it on this context's isolation. The child reaches this context synchronously on its
    /// isolation (like Core Data's children, which `performAndWait` on their parent) whenever it
    /// fetches, faults or saves. Waiting for the child from this context is allowed only while
    /// the child is not itself waiting for this context:
    ///
    /// - `child.performAndWait { ... }` from this context's isolation (from the main actor, for
    ///   a child of the view context) works: while this context waits for its child it is idle,
    ///   so the child's hops run this context's part on the child's queue.
    /// - Calling `child.performAndWait` while the child is busy in a `perform` that is reaching
    ///   this context can never end: Loom traps at once with "Loom deadlock: context '...' waits
    ///   synchronously for its child '...', which is waiting for it". Wait for a child that may
    ///   be busy with `await child.perform { ... }`.
    public func newChildContext(name: String = "Loom child context") -> BackgroundContext {
        ConcurrencyDebugging.check(self, #function)
        return BackgroundContext(coordinator: coordinator, name: name, parent: ParentLink(self))
    }

    /// Whether this context saves into a parent context rather than the store.
    public var hasParentContext: Bool { parent != nil }

    /// Saves this context and then each ancestor in turn, up to the store.
    ///
    /// For a root context this is ``save()``.
    public func saveRecursively() throws(LoomError) {
        try save()
        guard let parent else { return }
        try parent.run { (context) throws(LoomError) in try context.saveRecursively() }
    }
}
