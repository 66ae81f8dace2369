extension ManagedObjectContext {
    /// A store failure that a call unable to throw ran into and that was not reported yet;
    /// the next ``save()`` throws it (and clears it).
    ///
    /// Property reads, to-many relationships, batched results and ``insert(_:)`` cannot throw.
    /// When the store fails under them (an I/O error, or the container was closed), they do not
    /// trap; they leave the objects readable and note the error here:
    ///
    /// - A fault whose row cannot be read stays a fault (``BackedObject/isFault``) and is *not*
    ///   forgotten: for now optional attributes read `nil`, others their default or their
    ///   type's zero value, relationships read empty, as an inaccessible fault's do; changes to
    ///   it are not kept. Its next use reads the row again. ``fulfillFault(of:)`` and
    ///   `existingObject(with:)` throw the store's error instead.
    /// - A to-many relationship that cannot be loaded reads as its unsaved members only, and is
    ///   loaded again on its next use.
    /// - A batch of ``FetchResultsCollection`` that cannot be read comes back as faults.
    /// - An object inserted while no key can be reserved awaits its key (see ``insert(_:)``).
    /// - An object whose row another context or process deleted (a merged deletion, or a fault
    ///   that found its row gone) reads as deleted and takes changes without a trap, but a
    ///   change to it is `LoomError/Code/objectNotFound` here: the next save refuses rather
    ///   than save the rest of the change without it. ``rollback()`` forgets it with the change.
    ///
    /// ```swift
    /// let title = book.title                  // the store failed: a placeholder value
    /// if let error = context.pendingStoreError { show(error) }
    /// try context.save()                      // throws it
    /// ```
    ///
    /// Read it on this context's isolation.
    public var pendingStoreError: LoomError? {
        ConcurrencyDebugging.check(self, #function)
        return readFailure ?? changeToDeletedObject ?? (pending.awaitingKeys.isEmpty ? nil : keyFailure)
    }

    /// Notes that `backing`, deleted elsewhere after this context read it, was changed: the
    /// next save throws, naming it (the first one is kept).
    func recordChangeToDeletedObject(_ backing: ObjectBacking, property: String) {
        guard changeToDeletedObject == nil else { return }
        let id = objectID(of: backing)
        changeToDeletedObject = LoomError(
            .objectNotFound,
            "\(id).\(property) was changed after another context or process deleted \(id) from the store: the change cannot be saved, and nothing of this save was. Roll back, fetch again and redo the change.",
            entity: backing.entity.name, objectID: id)
    }

    /// Notes a read failure for the next save (the first one is kept).
    func recordReadFailure(_ error: LoomError) {
        if readFailure == nil { readFailure = error }
    }

    /// Keeps an object whose key could not be reserved until the next save gives it one.
    func awaitKey(_ object: any BackedObject, _ error: LoomError) {
        keyFailure = error
        if !pending.awaitingKeys.contains(where: { $0 === object }) { pending.awaitingKeys.append(object) }
    }

    /// Keeps a relationship change between a registered object and one awaiting its key until
    /// the next save (a later change of the same relationship replaces it).
    func deferRelationship(_ j: Int, of backing: ObjectBacking, to objects: [any BackedObject]) {
        guard let owner = identityMap.object(for: RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)) else { return }
        forgetDeferredRelationship(j, of: backing)
        pending.relationshipsAwaitingKeys.append((owner, j, objects))
    }

    /// Drops a deferred change of relationship `j` of `backing`: a newer change replaces it.
    func forgetDeferredRelationship(_ j: Int, of backing: ObjectBacking) {
        if pending.relationshipsAwaitingKeys.isEmpty { return }
        pending.relationshipsAwaitingKeys.removeAll { $0.owner._loomBacking === backing && $0.relationship == j }
    }

    func forgetObjectsAwaitingKeys() {
        pending.awaitingKeys = []
        pending.relationshipsAwaitingKeys = []
        keyFailure = nil
    }

    /// Called first by every save: gives the objects awaiting keys their keys (and sets the
    /// relationships deferred for them), then throws the read failure not reported yet, if
    /// any. Throws the store's error, changing nothing else, when a key still cannot be had.
    func reportStoreFailures() throws(LoomError) {
        if !pending.awaitingKeys.isEmpty {
            for object in pending.awaitingKeys where object._loomBacking.state == .detached {
                try insertObject(object, reportingKeyFailure: true)
            }
            let relationships = pending.relationshipsAwaitingKeys
            forgetObjectsAwaitingKeys()
            for (owner, j, objects) in relationships {
                let backing = owner._loomBacking
                guard backing.context === self, !backing.isDeleted else { continue }
                let targets = objects.filter { $0._loomBacking.context === self && !$0._loomBacking.isDeleted }
                setRelationship(j, of: backing, to: targets)
            }
        }
        if let error = readFailure {
            readFailure = nil
            throw error
        }
        if let error = changeToDeletedObject {
            changeToDeletedObject = nil
            throw error
        }
    }
}
