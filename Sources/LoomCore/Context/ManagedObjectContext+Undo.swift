extension ManagedObjectContext {
    /// Undoes the last step: the changes of the last event or ``undoGroup(_:_:)``, in memory.
    ///
    /// Attribute values, relationships (both sides), inserts and deletes (with what their delete
    /// rules reached) come back as they were before the step; the step moves to the redo stack.
    /// The store is not touched: undoing a saved step makes changes to save (an undone insert
    /// becomes a delete, an undone delete an insert of the same object, with the same ID).
    /// Changes merged from elsewhere since the step are kept: only the properties the step
    /// changed are put back. The current event ends first (``processPendingChanges()``), so
    /// its changes are the step undone. Does nothing without an ``undoManager`` or a step.
    ///
    /// Call it on this context's isolation, outside ``undoGroup(_:_:)`` (a programmer error,
    /// which traps). No I/O, unless an object it puts back is a fault, or a to-many
    /// relationship has to be read to apply a delete rule.
    public func undo() {
        ConcurrencyDebugging.check(self, #function)
        play(.undoing)
    }

    /// Redoes the last step undone (see ``undo()``). A new change, once something was undone,
    /// empties the redo stack. Call it on this context's isolation, outside ``undoGroup(_:_:)``.
    public func redo() {
        ConcurrencyDebugging.check(self, #function)
        play(.redoing)
    }

    /// Whether ``undo()`` has a step to undo (``UndoStack/canUndo``; `false` without an
    /// ``undoManager``). Read it on this context's isolation.
    public var canUndo: Bool { undoStack?.canUndo ?? false }

    /// Whether ``redo()`` has a step to redo (``UndoStack/canRedo``).
    public var canRedo: Bool { undoStack?.canRedo ?? false }

    /// Runs `body` as one named step of the undo stack: what it changes, and what the delete
    /// rules of what it deletes change, is undone by one ``undo()``, which a menu can show as
    /// "Undo \(name)" (``UndoStack/undoActionName``).
    ///
    /// ```swift
    /// context.undoGroup("Rename") {
    ///     book.title = "Threads"
    ///     book.author?.name = "Ann"
    /// }
    /// ```
    ///
    /// The current event ends first (``processPendingChanges()``), so that earlier changes stay
    /// a step of their own; the group ends with one too. Groups nested inside it join it (the
    /// outermost name counts). Without an ``undoManager`` it only runs `body`. Call it on this
    /// context's isolation.
    public func undoGroup<T, E: Error>(_ name: String, _ body: () throws(E) -> T) throws(E) -> T {
        ConcurrencyDebugging.check(self, #function)
        guard let stack = undoStack else { return try body() }
        if stack.explicitDepth == 0 {
            processPendingChanges()
            stack.pendingName = name
        }
        stack.explicitDepth += 1
        defer {
            processPendingChanges()
            stack.explicitDepth -= 1
            if stack.explicitDepth == 0 {
                stack.pendingName = ""
                stack.closeGroup()
            }
        }
        return try body()
    }

    /// Runs `body` without recording its changes for undo (Core Data's
    /// `disableUndoRegistration()` between two `processPendingChanges()`): use it for changes
    /// the user did not make, such as an import or a computed cache.
    ///
    /// The current event ends before and after it, so that its changes join no step and its
    /// delete rules run unrecorded too. Steps recorded before it can still be undone; they put
    /// back only what they changed, so undoing one may leave the changes made here in place or
    /// (an object inserted before, changed here) remove them with the object. Call it on this
    /// context's isolation.
    public func withoutUndo<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        ConcurrencyDebugging.check(self, #function)
        guard let stack = undoStack else { return try body() }
        processPendingChanges()
        stack.suspensions += 1
        defer {
            processPendingChanges()
            stack.suspensions -= 1
        }
        return try body()
    }

    /// Runs `body`, an internal operation that changes objects through the recorded paths
    /// without being the app's change (a save's conflict resolution, a child's save into its
    /// parent), with recording suspended.
    func withUndoSuspended<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        guard let stack = undoStack else { return try body() }
        stack.suspensions += 1
        defer { stack.suspensions -= 1 }
        return try body()
    }

    /// Plays the top step of the undo (or redo) stack back, recording what it changes as a
    /// step of the other.
    private func play(_ mode: UndoStack.Mode) {
        guard let stack = undoStack else { return }
        guard stack.explicitDepth == 0 else {
            fatalError("\(mode == .undoing ? "undo()" : "redo()") was called inside undoGroup(_:_:) of context '\(name ?? "unnamed")'; call it after the group ends.")
        }
        guard stack.mode == .normal else { return }   // an observer of the playback's event
        processPendingChanges()
        guard stack.isRecording, let step = mode == .undoing ? stack.undoSteps.popGroup() : stack.redoSteps.popGroup() else { return }
        stack.beginPlayback(mode, name: step.name)
        UndoPlayback(context: self).play(step.records)
        processPendingChanges()
        stack.endPlayback()
    }

    // MARK: Recording

    /// Records the value slot `slot` of `backing` held before this change (the edit paths call
    /// it when ``undoManager`` is set and recording).
    func recordUndoValue(of backing: ObjectBacking, slot: Int, old: StoredValue, in stack: UndoStack) {
        guard let object = identityMap.object(for: RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)),
              object._loomBacking === backing else { return }
        stack.recordValue(object, slot: slot, old: old)
    }
}
