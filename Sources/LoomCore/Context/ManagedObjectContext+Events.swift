extension ManagedObjectContext {
    /// Calls `handler` for every event of `kind`, synchronously on this context's isolation.
    ///
    /// ```swift
    /// let token = context.addObserver(for: .didSave) { event in
    ///     if case .didSave(let changes) = event { print(changes.inserted.count) }
    /// }
    /// ```
    @discardableResult
    public func addObserver(for kind: ContextEvent.Kind, _ handler: @escaping (ContextEvent) -> Void) -> ObserverToken {
        observation.addObserver(for: kind, handler)
    }

    /// Stops calling an observer.
    public func removeObserver(_ token: ObserverToken) {
        observation.removeObserver(token)
    }

    /// Every event this context posts from now on, as an `AsyncSequence`. The stream ends when
    /// the context is deallocated.
    ///
    /// ```swift
    /// Task { @MainActor in
    ///     for await event in container.viewContext.events() { refreshUI(event) }
    /// }
    /// ```
    public func events() -> AsyncStream<ContextEvent> {
        observation.hub.stream()
    }

    /// Whether anything observes this context's events (observers or event streams).
    var hasEventListeners: Bool { observation.hasListeners }

    func post(_ event: ContextEvent) { observation.post(event) }

    /// Ends the current "event": applies the delete rules of the objects deleted since the last
    /// one, closes the event's undo step (see ``UndoStack``), then posts `objectsDidChange` for
    /// everything inserted, changed or deleted. Runs by
    /// itself at the end of every `perform`, before every save, after merges, and for the view
    /// context at the end of the main actor's turn.
    public func processPendingChanges() {
        ConcurrencyDebugging.check(self, #function)
        moveOffReleasedGeneration()
        if let released = releasedGeneration {
            releasedGeneration = nil
            post(.queryGenerationReleased(released))
        }
        graph.propagateDeletes()
        // The event's changes, delete rules included, are one undo step.
        undoStack?.endOfEvent()
        guard !observation.isEmpty else {
            refreshLiveQueriesIfNeeded()
            return
        }
        let changes = observation.takeChanges(of: self)
        if !changes.isEmpty { post(.objectsDidChange(changes)) } else { refreshLiveQueriesIfNeeded() }
    }

    /// Records that an object changed in the current event (see ``ContextObservation``).
    func noteEventChange(_ backing: ObjectBacking, inserted: Bool = false, deleted: Bool = false) {
        observation.noteChange(backing, inserted: inserted, deleted: deleted)
    }

    func scheduleEndOfEventIfNeeded() { observation.scheduleEndOfEvent() }

    /// Evaluates every live query again if something changed that no event lists.
    func refreshLiveQueriesIfNeeded() { observation.refreshLiveQueriesIfNeeded() }

    /// Notes that live queries must be evaluated again at the end of the current event.
    func liveQueriesMayHaveMissedChanges() { observation.liveQueriesMayHaveMissedChanges() }
}
