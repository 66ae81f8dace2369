extension ManagedObjectContext {
    /// Writes every unsaved change to the store in one transaction.
    ///
    /// First the delete rules of deleted objects run (``processPendingChanges()``). Then the
    /// changes are validated: every required attribute and to-one relationship has a value of
    /// its type, no deleted object still holds objects in a relationship whose rule is
    /// ``DeleteRule/deny``, and no uniqueness constraint is broken among the objects being saved. The store
    /// then checks uniqueness against saved rows and that no saved row changed underneath
    /// (optimistic locking); what it finds is resolved by ``mergePolicy``. If the save fails,
    /// nothing is written, the error says what and where (with every conflict in
    /// ``LoomError/conflicts``), and the context is left exactly as it was, still usable: fix
    /// the cause and save again.
    ///
    /// Posts `willSave`, then `didSave` with the saved changes; other contexts of the
    /// coordinator that merge automatically receive the save on their own isolation.
    ///
    /// - Throws: ``LoomError`` with code ``LoomError/Code/missingRequiredValue``,
    ///   ``LoomError/Code/typeMismatch``, ``LoomError/Code/deleteDenied``,
    ///   ``LoomError/Code/uniquenessViolation``, ``LoomError/Code/versionConflict`` or
    ///   ``LoomError/Code/storeFailure``.
    public func save() throws(LoomError) {
        try save(mergingIntoViewContext: true)
    }

    /// Runs one save (``SaveOperation``) on the context's isolation.
    func save(mergingIntoViewContext: Bool) throws(LoomError) {
        ConcurrencyDebugging.check(self, "save()")
        guard undoStack != nil else { return try SaveOperation(self, mergingIntoViewContext: mergingIntoViewContext).run() }
        // The event's delete rules join its undo step; what the save itself changes (conflicts
        // resolved by the merge policy) is not the app's change, and is not recorded.
        processPendingChanges()
        try withUndoSuspended { () throws(LoomError) in try SaveOperation(self, mergingIntoViewContext: mergingIntoViewContext).run() }
    }

    func objectID(_ entity: EntityDescription, _ key: Int64) -> AnyObjectID {
        AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: entity.name, primaryKey: key)
    }

    func objectID(of backing: ObjectBacking) -> AnyObjectID {
        AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: backing.entity.name, primaryKey: backing.key)
    }
}
