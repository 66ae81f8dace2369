extension ObjectMaterializer {
    /// Loads relationships of fetched objects, one query per relationship.
    static func prefetch(_ relationships: [Int], of entity: EntityDescription, for objects: [any BackedObject], in context: ManagedObjectContext) throws(LoomError) {
        guard !objects.isEmpty else { return }
        for j in relationships {
            let r = context.coordinator.schema.relationship(j, of: entity)
            switch r.storage {
            case .foreignKey(let slot):
                var keys: [Int64] = []
                var seen: Set<Int64> = []
                for object in objects {
                    let backing = object._loomBacking
                    if backing.state == .fault { context.fulfillFault(backing) }   // from the cache the fetch filled
                    guard case .integer(let key) = backing.values[slot], seen.insert(key).inserted else { continue }
                    if context.registeredDestination(of: r, key: key)?.state == .loaded { continue }
                    keys.append(key)
                }
                guard !keys.isEmpty else { continue }
                let generation = context.coordinator.currentGeneration
                // A destination with sub-entities: each entity's table in turn, for the keys
                // not found yet.
                for narrowed in r.concreteDestinations(in: context.coordinator.schema) where !keys.isEmpty {
                    let destination = narrowed.destination
                    let rows = try context.rowSource.baseRows(of: destination, keys: keys)
                    if r.leadsToSubentities {
                        context.coordinator.keyEntities.note(destination, keys: rows.map(\.key))
                        let found = Set(rows.map(\.key))
                        keys.removeAll { found.contains($0) }
                    }
                    if context.parent == nil && context.readsLatestData {
                        context.coordinator.cache(rows, of: destination, readAt: generation)
                    } else {
                        for row in rows { _ = materialize(row, of: destination, as: .loaded, in: context) }
                    }
                }
            default:
                let owners = objects.map(\._loomBacking).filter { $0.toMany[j] == nil && !$0.isDeleted }
                guard !owners.isEmpty else { continue }
                let graph = context.graph
                let holdsRows = graph.membersHoldRows
                let generation = context.coordinator.currentGeneration
                let pairs = try context.currentRelated(r, keys: owners.map(\.key))
                // Grouped run by run (the store returns them by owner): one lookup and one
                // allocation per owner, rather than per row.
                var byOwner: [Int64: [StoreRow]] = [:]
                byOwner.reserveCapacity(owners.count)
                var start = pairs.startIndex
                while start < pairs.endIndex {
                    let owner = pairs[start].owner
                    var end = start + 1
                    while end < pairs.endIndex && pairs[end].owner == owner { end += 1 }
                    byOwner[owner, default: []].append(contentsOf: pairs[start..<end].lazy.map(\.row))
                    start = end
                }
                // Members of several entities go each to its objects' place (a list keeps one
                // entity's rows).
                let keepsRows = holdsRows && !r.leadsToSubentities
                for owner in owners {
                    let rows = byOwner[owner.key] ?? []
                    var list = graph.memberList(of: owner, r, rows.map(\.key))
                    // Each owner keeps its members' rows, as a to-many fault does.
                    if keepsRows { list.keep(graph.savedRows(rows, of: r.destination), readAt: generation) }
                    owner.toMany[j] = list
                }
                if !keepsRows {
                    for (destination, rows) in context.rowsByEntity(pairs.map(\.row), of: r) {
                        graph.cacheMemberRows(r.leadsToSubentities ? graph.savedRows(rows, of: destination) : rows, of: destination, readAt: generation)
                    }
                }
            }
        }
    }
}
