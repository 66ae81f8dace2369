extension SaveOperation {
    /// A child's save: its changes become unsaved changes of its parent. `inserted` is
    /// ``insertedInOrder()``.
    func saveIntoParent(_ parent: ParentLink, inserted: [InsertedObject]) throws(LoomError) {
        var child = ChildChanges()
        for (_, b) in inserted {
            child.inserts.append(.init(entity: b.entity, key: b.key, values: b.values))
        }
        for (key, object) in context.pending.updated.sorted(by: { $0.key.key < $1.key.key }) where context.pending.deleted[key] == nil {
            let b = object._loomBacking
            let changed = b.changedSlots()
            if !changed.isEmpty { child.updates.append(.init(entity: b.entity, key: b.key, changes: changed)) }
        }
        for object in context.pending.deleted.values {
            child.deletes.append(.init(entity: object._loomBacking.entity, key: object._loomBacking.key))
        }
        for (link, added) in context.pending.links.sorted(by: { ($0.key.table.name, $0.key.source, $0.key.target) < ($1.key.table.name, $1.key.source, $1.key.target) }) {
            child.links.append(.init(table: link.table, source: link.source, target: link.target, added: added))
        }
        let pushed = child
        try parent.run { (context) throws(LoomError) in
            // A child's save is not recorded in the parent's undo stack (as a merge is not);
            // the parent's own event ends first, its delete rules recorded with it.
            if context.undoStack != nil { context.processPendingChanges() }
            try context.withUndoSuspended { () throws(LoomError) in
                try pushed.apply(to: context)
                context.processPendingChanges()
            }
        }
        let versions = Dictionary(uniqueKeysWithValues: (Array(context.pending.inserted.values) + Array(context.pending.updated.values)).map { (ObjectIdentifier($0._loomBacking), $0._loomBacking.version) })
        let changes = commitSavedState(recording: context.hasEventListeners).changes
        // A child's objects keep the parent's versions: only the store's saves bump them.
        for object in context.identityMap.objects {
            if let version = versions[ObjectIdentifier(object._loomBacking)] { object._loomBacking.version = version }
        }
        context.post(.didSave(changes))
    }
}
