extension ManagedObjectContext {
    /// Deletes, in the store, every object the request matches, with the delete rules of their
    /// relationships applied there (cascade, nullify, deny); see ``BatchDeleteRequest``.
    ///
    /// Runs on this context's isolation, like ``save()``. When it returns, this context has
    /// merged the deletion (its objects that were deleted are deleted, those whose relationships
    /// changed are refreshed, `objectsDidChange` was posted, live queries updated), and every
    /// other context that merges automatically gets it as it gets a save. Unsaved changes of
    /// this context are neither saved nor lost. A deny rule holding, a store failure or a
    /// nullified required relationship throws, and the store is left as it was.
    @discardableResult
    public func execute<Model: PersistentModel>(_ request: BatchDeleteRequest<Model>) throws(LoomError) -> BatchResult {
        ConcurrencyDebugging.check(self, "execute(_:)")
        return try BatchExecution(context: self).execute(request)
    }

    /// Sets, in the store, the request's attributes on every object it matches; see
    /// ``BatchUpdateRequest``.
    ///
    /// Runs on this context's isolation, like ``save()``, and merges like
    /// ``execute(_:)-(BatchDeleteRequest<Model>)``: this context's unsaved edits stay on top. A
    /// value of the wrong type, `nil` for a required attribute or a broken uniqueness
    /// constraint throws, and the store is left as it was.
    @discardableResult
    public func execute<Model: PersistentModel>(_ request: BatchUpdateRequest<Model>) throws(LoomError) -> BatchResult {
        ConcurrencyDebugging.check(self, "execute(_:)")
        return try BatchExecution(context: self).execute(request)
    }

    /// Inserts the request's rows in the store, uniquing them as it says; see
    /// ``BatchInsertRequest``.
    ///
    /// Runs on this context's isolation, like ``save()``, and merges like
    /// ``execute(_:)-(BatchDeleteRequest<Model>)``. A row with a value of the wrong type,
    /// without a value for a required attribute, or (with ``BatchInsertRequest/Uniquing/fail``)
    /// matching an existing object throws, naming the row, and the store is left as it was.
    @discardableResult
    public func execute<Model: PersistentModel>(_ request: BatchInsertRequest<Model>) throws(LoomError) -> BatchResult {
        ConcurrencyDebugging.check(self, "execute(_:)")
        return try BatchExecution(context: self).execute(request)
    }

    /// Runs a uniqued import (``ImportRequest``), chunk by chunk, each a batch insert that
    /// updates matching objects, calling `progress` after each committed chunk.
    ///
    /// Runs on this context's isolation, like ``save()``; like every batch request, what it
    /// writes is merged here when each chunk commits, and by every automatically merging
    /// context. Returns the progress after the last chunk.
    @discardableResult
    public func execute<Model: PersistentModel, Source: Sendable>(_ request: ImportRequest<Model, Source>, progress: ((ImportProgress) -> Void)? = nil) throws -> ImportProgress {
        ConcurrencyDebugging.check(self, "execute(_:)")
        return try BatchExecution(context: self).execute(request, progress: progress)
    }
}
