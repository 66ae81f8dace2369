/// The rows a save event carries to the contexts that merge it, and which of its objects they
/// cover. A context's save carries every row it wrote; another coordinator's commit carries the
/// rows its coordinator read on the store's watcher thread, and a batch request the rows it
/// built, both only for the entities some context holds (``MergeInterest``). Merging applies
/// them and reads nothing.
struct EventRows: Sendable {
    /// The committed rows of inserted and updated objects, by ID.
    var rows: [AnyObjectID: StoreRow]
    /// The entities whose inserted and updated objects are all in `rows`, as far as they are
    /// still in the store; `nil` for all of them.
    var covered: Set<ObjectIdentifier>?
    /// Why some entity's rows could not be read: its objects are not covered.
    var failure: LoomError?

    /// Every inserted and updated object's row (a context's save).
    static func all(_ rows: [AnyObjectID: StoreRow]) -> EventRows {
        EventRows(rows: rows, covered: nil)
    }

    /// What merging finds for an updated object of `entity`.
    enum Lookup {
        /// Its row as committed (or newer).
        case row(StoreRow)
        /// No new values: its row did not change (only a to-many list did), or it is gone
        /// from the store, and the event that deleted it follows.
        case unchanged
        /// Not known: the row was not read (no context held the entity then, or the read
        /// failed). Merging turns a loaded object without unsaved changes back into a fault.
        case unknown
    }

    func lookup(_ id: AnyObjectID, of entity: ObjectIdentifier) -> Lookup {
        if let row = rows[id] { return .row(row) }
        if covered?.contains(entity) ?? true { return .unchanged }
        return .unknown
    }

    /// Reads, in one store query per entity, the rows of what `changes` inserted and updated
    /// that `interest` wants, through the coordinator (so that they also go into its shared
    /// cache). Called once per commit, on the thread that learned of it (the store's watcher
    /// for another coordinator's commit), never by a merging context.
    ///
    /// A read that fails leaves its entity uncovered, with the error in ``failure``: merging
    /// then refaults that entity's loaded objects, whose next use reads the store and reports
    /// what fails there.
    static func read(_ changes: ObjectChanges, for interest: MergeInterest, through coordinator: PersistentStoreCoordinator) -> EventRows {
        var found = EventRows(rows: [:], covered: interest.entities)
        if interest.isEmpty || (changes.updated.isEmpty && changes.inserted.isEmpty) { return found }
        var wanted: [ObjectIdentifier: (entity: EntityDescription, keys: [Int64])] = [:]
        var last: (name: String, entity: EntityDescription?)?
        func note(_ id: AnyObjectID, _ wants: (ObjectIdentifier) -> Bool) {
            // IDs come in runs of one entity: its description is looked up once per run.
            if last?.name != id.entityName { last = (id.entityName, coordinator.schema.entity(named: id.entityName)) }
            guard let entity = last?.entity else { return }
            let key = ObjectIdentifier(entity)
            guard wants(key) else { return }
            wanted[key, default: (entity, [])].keys.append(id.primaryKey)
        }
        for id in changes.updated { note(id, interest.wantsUpdated) }
        for id in changes.inserted { note(id, interest.wantsInserted) }
        for (key, request) in wanted {
            do {
                for row in try coordinator.rows(of: request.entity, keys: request.keys) {
                    found.rows[AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: request.entity.name, primaryKey: row.key)] = row
                }
            } catch {
                found.covered?.remove(key)
                found.failure = error
            }
        }
        return found
    }
}
