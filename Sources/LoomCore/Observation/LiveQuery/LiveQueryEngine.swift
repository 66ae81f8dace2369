/// A section's identity inside a live query: the value its key sorts by, compared as the store
/// compares it (text by its UTF-8 bytes, so two spellings Swift calls equal are two sections, in
/// the place the store sorts each).
struct SectionIdentity: Hashable {
    let value: StoredValue

    static func == (a: SectionIdentity, b: SectionIdentity) -> Bool {
        if case .text(let x) = a.value, case .text(let y) = b.value { return StoredValue.compareText(x, y) == 0 }
        return a.value == b.value
    }

    func hash(into hasher: inout Hasher) {
        if case .text(let text) = value {
            hasher.combine(0 as UInt8)
            for byte in text.utf8 { hasher.combine(byte) }
        } else {
            hasher.combine(value)
        }
    }

    /// The one section of a query without sections.
    static let whole = SectionIdentity(value: .null)
}

/// A live query's result as the engine hands it to its consumer: section identities and keys.
typealias LiveSnapshot = SectionedResult<SectionIdentity, Int64>

/// Where a live query's new results go: a stream (``LiveQuery``) or an observable object
/// (``LiveResultsObserver``). Called on the context's isolation.
protocol LiveQuerySink: AnyObject {
    /// A new result, and the properties that changed of the items it shares with the last one
    /// handed over (by key). Called after every change that may have changed the result, with
    /// the same result when only items' properties changed. `touched` holds every item that may
    /// have entered, left or moved (the others are in both results, in the same section and
    /// order); `nil` when anything may have. `entities` names the entity of each item whose
    /// entity is not the query's own (a query over a hierarchy; empty otherwise): keys are
    /// unique within a hierarchy, so the key and this name make the item's object ID.
    func receive(_ result: LiveSnapshot, updated: [Int64: Set<String>], touched: Set<Int64>?, entities: [Int64: String], in context: ManagedObjectContext)
    /// The query can no longer be kept current (the store failed); no result follows.
    func fail(_ error: LoomError)
    /// The context is gone; no result follows.
    func finish()
}

/// What one `objectsDidChange` changed, by entity and key, computed once for all the live
/// queries of a context.
struct LiveChangeDigest {
    struct EntityChanges {
        /// Keys inserted, deleted, or changed in properties nobody named (a refresh).
        var structural: Set<Int64> = []
        /// Keys updated, with the names of the properties that changed.
        var properties: [Int64: Set<String>] = [:]
        /// Every property name in `properties`.
        var propertyUnion: Set<String> = []
        /// Whether an update names no property: its values went back to the saved ones (a
        /// context reports what differs from the saved values, not what changed since the last
        /// event), so any property may have changed.
        var hasUnnamed = false
    }

    /// Anything may have changed (a reset, history lost, a generation moved): every query is
    /// evaluated again. The changes listed are still read: they say which items were updated.
    var everything: Bool
    var entities: [String: EntityChanges] = [:]

    init(_ changes: ObjectChanges, everything: Bool) {
        self.everything = everything
        for id in changes.inserted { entities[id.entityName, default: EntityChanges()].structural.insert(id.primaryKey) }
        for id in changes.deleted { entities[id.entityName, default: EntityChanges()].structural.insert(id.primaryKey) }
        // Updates come in runs of one entity, often with the same changed properties: the
        // entity's entry and the union are touched once per run, not once per object.
        var run: (name: String, changes: EntityChanges)?
        var lastProperties: Set<String>?
        for id in changes.updated {
            if run?.name != id.entityName {
                if let run { entities[run.name] = run.changes }
                run = (id.entityName, entities[id.entityName] ?? EntityChanges())
                lastProperties = nil
            }
            guard let properties = changes.changedProperties[id] else {
                run!.changes.structural.insert(id.primaryKey)
                continue
            }
            if run!.changes.properties.isEmpty { run!.changes.properties.reserveCapacity(changes.updated.count) }
            // One lookup for a key seen once (the common case), two for one seen again.
            if let earlier = run!.changes.properties.updateValue(properties, forKey: id.primaryKey) {
                run!.changes.properties[id.primaryKey] = earlier.union(properties)
            }
            if properties != lastProperties {
                run!.changes.propertyUnion.formUnion(properties)
                if properties.isEmpty { run!.changes.hasUnnamed = true }
                lastProperties = properties
            }
        }
        if let run { entities[run.name] = run.changes }
        for id in changes.refreshed where changes.changedProperties[id] == nil && !changes.updated.contains(id) {
            entities[id.entityName, default: EntityChanges()].structural.insert(id.primaryKey)
        }
    }
}

/// Keeps one live query's result current in its context, on the context's isolation: the keys
/// of the matching objects in order, each with the values it sorts by (its section's first).
///
/// After each `objectsDidChange` it looks at what the query reads: a change to no entity or
/// property the query reads costs a few dictionary lookups; changes to the query's own entity
/// are judged object by object and merged into the sorted result (O(k log k + n)); a change to
/// a related object the predicate, sort or section reads, or to a windowed query (limit,
/// offset), evaluates the query again.
///
/// A query of an entity with sub-entities (or an abstract one) lists the objects of each entity
/// of the hierarchy the request covers (its parts), each stored in a table of its own: it is
/// evaluated per part and merged in the query's order (as ``HierarchyFetch`` does), and a
/// change is judged with its own entity's translation of the query. Items stay identified by
/// key alone, which one key space per hierarchy makes unique (checked first:
/// ``KeySpaceCheck``); the engine remembers the entity of each.
final class LiveQueryEngine {
    struct Entry {
        let key: Int64
        /// The values of the sort keys, the section key's first.
        let values: [StoredValue]
    }

    /// An entity whose objects the query lists, with the query translated for it (a type
    /// filter, `is` or `as?`, reads differently in each entity).
    struct Part {
        let entity: EntityDescription
        var query: StoreQuery
    }

    unowned let context: ManagedObjectContext
    /// The request's query, with the section key as its first sort key.
    let query: StoreQuery
    /// The entities the query lists: the query's own entity alone, unless the query spans a
    /// hierarchy (``spansHierarchy``).
    let parts: [Part]
    /// Whether the query lists other entities' objects than its own entity's (a hierarchy's).
    let spansHierarchy: Bool
    /// The index in ``parts`` of each entity listed, by name.
    private let partIndexes: [String: Int]
    let sectioned: Bool
    let includesPendingChanges: Bool
    /// The properties the query reads, by entity name (relationships followed count on both
    /// sides: the source's and the inverse's).
    let reads: [String: Set<String>]
    /// The entities reached through relationships (the query's own, if a path leads back to it).
    let relatedEntities: [String]
    let sortNodes: [PredicateNode]
    private(set) var entries: [Entry] = []
    private var members: Set<Int64> = []
    /// In a query spanning a hierarchy, the entity of each item of the result, by key.
    private var entityNames: [Int64: String] = [:]
    weak var sink: (any LiveQuerySink)?

    /// A live query of `query`'s entity alone, or, given `parts`, of each of those entities.
    init(context: ManagedObjectContext, query: StoreQuery, parts: [Part]? = nil, sectioned: Bool, includesPendingChanges: Bool) {
        self.context = context
        self.query = query
        let parts = parts ?? [Part(entity: query.entity, query: query)]
        self.parts = parts
        self.spansHierarchy = parts.count != 1 || parts[0].entity !== query.entity
        var partIndexes: [String: Int] = [:]
        for (i, part) in parts.enumerated() { partIndexes[part.entity.name] = i }
        self.partIndexes = partIndexes
        self.sectioned = sectioned
        self.includesPendingChanges = includesPendingChanges
        let schema = context.coordinator.schema
        var reads: [String: Set<String>] = [query.entity.name: []]
        var related: Set<String> = []
        for part in parts {
            part.query.predicate?.collectReads(of: part.entity, in: schema, into: &reads, related: &related)
            for key in part.query.sortKeys { key.valueNode.collectReads(of: part.entity, in: schema, into: &reads, related: &related) }
        }
        self.reads = reads
        self.relatedEntities = related.sorted()
        self.sortNodes = query.sortKeys.map(\.valueNode)
    }

    deinit { sink?.finish() }

    /// Evaluates the query and hands the result to the sink.
    func start() throws(LoomError) {
        if spansHierarchy {
            try context.coordinator.keySpaceCheck.requireUniqueKeys(
                in: query.entity, schema: context.coordinator.schema, store: context.coordinator.store, for: "A live query of \(query.entity.name)")
        }
        entries = try evaluateAll()
        members = Set(entries.map(\.key))
        sink?.receive(snapshot(), updated: [:], touched: nil, entities: entityNames, in: context)
    }

    /// Brings the result up to date with one event's changes; hands it on if it changed, or if
    /// items in it were updated.
    func update(_ digest: LiveChangeDigest) {
        guard sink != nil else { return }
        do {
            switch try reevaluate(digest) {
            case .unchanged:
                let updated = updatedMembers(digest)
                if !updated.isEmpty { sink?.receive(snapshot(), updated: updated, touched: [], entities: entityNames, in: context) }
            case .touched(let keys):
                sink?.receive(snapshot(), updated: updatedMembers(digest), touched: keys, entities: entityNames, in: context)
            case .replaced:
                sink?.receive(snapshot(), updated: updatedMembers(digest), touched: nil, entities: entityNames, in: context)
            }
        } catch {
            sink?.fail(error)
            sink = nil
        }
    }

    /// What re-evaluation did to the result.
    private enum Outcome {
        case unchanged
        /// Only these objects may have entered, left or moved.
        case touched(Set<Int64>)
        /// Anything may have changed.
        case replaced
    }

    /// Brings `entries` up to date.
    private func reevaluate(_ digest: LiveChangeDigest) throws(LoomError) -> Outcome {
        if digest.everything {
            replace(with: try evaluateAll())
            return .replaced
        }
        var relatedChanged = false
        for name in relatedEntities {
            guard let changes = digest.entities[name] else { continue }
            if !changes.structural.isEmpty || changes.hasUnnamed || !changes.propertyUnion.isDisjoint(with: reads[name] ?? []) {
                relatedChanged = true
                break
            }
        }
        if spansHierarchy { return try reevaluateParts(digest, relatedChanged: relatedChanged) }
        let own = digest.entities[query.entity.name]
        let ownReads = reads[query.entity.name] ?? []
        let ownChanged = own.map { !$0.structural.isEmpty || $0.hasUnnamed || !$0.propertyUnion.isDisjoint(with: ownReads) } ?? false
        guard relatedChanged || ownChanged else { return .unchanged }
        if relatedChanged || query.fetchLimit != nil || query.fetchOffset > 0 || !includesPendingChanges {
            replace(with: try evaluateAll())
            return .replaced
        }
        var affected = own!.structural
        affected.reserveCapacity(affected.count + own!.properties.count)
        // When the query reads every property that changed (all of them scores, say), every
        // updated object is affected: no set comparison per object. One that names no property
        // (changed back to its saved values) always is.
        let readsAllChanged = own!.propertyUnion.isSubset(of: ownReads)
        for (key, properties) in own!.properties where readsAllChanged || properties.isEmpty || !properties.isDisjoint(with: ownReads) {
            affected.insert(key)
        }
        // Judging most of the result one object at a time costs more than one query.
        if affected.count > max(64, entries.count / 4) {
            replace(with: try evaluateAll())
            return .touched(affected)
        }
        try merge(affected)
        return .touched(affected)
    }

    /// ``reevaluate(_:)`` of a query spanning a hierarchy: each part's changes judged with its
    /// own translation of the query.
    private func reevaluateParts(_ digest: LiveChangeDigest, relatedChanged: Bool) throws(LoomError) -> Outcome {
        var affected: [Int64: Int] = [:]
        for (i, part) in parts.enumerated() {
            guard let own = digest.entities[part.entity.name] else { continue }
            let ownReads = reads[part.entity.name] ?? []
            for key in own.structural { affected[key] = i }
            // An update that names no property (one changed back to its saved value in a later
            // event) may have changed anything the query reads: judged again.
            for (key, properties) in own.properties where properties.isEmpty || !properties.isDisjoint(with: ownReads) { affected[key] = i }
        }
        guard relatedChanged || !affected.isEmpty else { return .unchanged }
        if relatedChanged || query.fetchLimit != nil || query.fetchOffset > 0 || !includesPendingChanges {
            replace(with: try evaluateAll())
            return .replaced
        }
        let keys = Set(affected.keys)
        if affected.count > max(64, entries.count / 4) {
            replace(with: try evaluateAll())
            return .touched(keys)
        }
        try merge(keys, parts: affected)
        return .touched(keys)
    }

    private func replace(with new: [Entry]) {
        entries = new
        members = Set(new.map(\.key))
    }

    /// The properties that changed of the objects in the result, by key.
    private func updatedMembers(_ digest: LiveChangeDigest) -> [Int64: Set<String>] {
        if spansHierarchy {
            var updated: [Int64: Set<String>] = [:]
            for part in parts {
                for (key, properties) in digest.entities[part.entity.name]?.properties ?? [:] where members.contains(key) {
                    // No property named (changed back to its saved value): any may have changed.
                    updated[key] = properties.isEmpty ? Set((0..<part.entity.storedValueCount).map(part.entity.storedValueName(at:))) : properties
                }
            }
            return updated
        }
        guard let own = digest.entities[query.entity.name], !own.properties.isEmpty else { return [:] }
        // Often every updated object is in the result: then the digest's own dictionary is
        // handed on, not copied key by key.
        if !own.hasUnnamed && own.properties.count <= members.count && own.properties.keys.allSatisfy(members.contains) { return own.properties }
        var updated: [Int64: Set<String>] = [:]
        if own.properties.count <= members.count {
            for (key, properties) in own.properties where members.contains(key) { updated[key] = properties }
        } else {
            for key in members { if let properties = own.properties[key] { updated[key] = properties } }
        }
        if own.hasUnnamed {
            // No property named (changed back to its saved values): any may have changed.
            let every = Set((0..<query.entity.storedValueCount).map(query.entity.storedValueName(at:)))
            for (key, properties) in updated where properties.isEmpty { updated[key] = every }
        }
        return updated
    }

    /// Judges the objects with these keys again, as the context sees them now, and puts those
    /// that match in their places. `parts` gives the part of each key in a query spanning a
    /// hierarchy (the query's own entity otherwise).
    private func merge(_ affected: Set<Int64>, parts affectedParts: [Int64: Int] = [:]) throws(LoomError) {
        let graph = ContextGraph(context)
        var entered: [Entry]
        if spansHierarchy {
            var keysByPart = Array(repeating: [Int64](), count: parts.count)
            for (key, part) in affectedParts { keysByPart[part].append(key) }
            entered = []
            for (i, keys) in keysByPart.enumerated() where !keys.isEmpty {
                let found = try judge(keys, of: parts[i], graph)
                for entry in found { entityNames[entry.key] = parts[i].entity.name }
                entered += found
            }
            let stayed = Set(entered.map(\.key))
            for key in affected where !stayed.contains(key) { entityNames[key] = nil }
        } else {
            entered = try judge(affected, of: parts[0], graph)
        }
        entered.sort(by: precedes)
        // One pass: the entries not affected, in their order, merged with those that entered.
        var merged: [Entry] = []
        merged.reserveCapacity(entries.count + entered.count)
        var j = 0
        let leaving = KeySet(affected)
        for entry in entries where !leaving.contains(entry.key) {
            while j < entered.count && precedes(entered[j], entry) {
                merged.append(entered[j])
                j += 1
            }
            merged.append(entry)
        }
        merged.append(contentsOf: entered[j...])
        for key in affected { members.remove(key) }
        for entry in entered { members.insert(entry.key) }
        entries = merged
    }

    /// The entries of the objects with these keys of `part` that match its query, as the
    /// context sees them now (unsorted).
    private func judge(_ keys: some Collection<Int64>, of part: Part, _ graph: ContextGraph) throws(LoomError) -> [Entry] {
        let entity = part.entity
        let entityID = ObjectIdentifier(entity)
        var candidates: [ContextGraph.Row] = []
        var unloaded: [Int64] = []
        for key in keys {
            if let backing = context.identityMap.backing(for: RowCacheKey(entity: entityID, key: key)), backing.state == .loaded {
                if let row = graph.row(entity, key) { candidates.append(row) }
            } else {
                unloaded.append(key)
            }
        }
        if !unloaded.isEmpty {
            // One query for the objects not loaded here; a key it does not return is deleted.
            for row in try context.rowSource.baseRows(of: entity, keys: unloaded) {
                // A registered fault deleted here reads as gone.
                if let backing = context.identityMap.backing(for: RowCacheKey(entity: entityID, key: row.key)), backing.isDeleted { continue }
                candidates.append(graph.remember(entity, row))
            }
        }
        warm(graph, for: candidates, query: part.query)
        var entered: [Entry] = []
        let sortNodes = spansHierarchy ? part.query.sortKeys.map(\.valueNode) : self.sortNodes
        for candidate in candidates where part.query.predicate?.matches(candidate, in: graph) ?? true {
            entered.append(Entry(key: candidate.key, values: sortNodes.map { $0.evaluate(candidate, in: graph) }))
        }
        if let failure = graph.failure { throw failure }
        return entered
    }

    /// The whole result, as a fetch would give it: with this context's unsaved changes (unless
    /// the request leaves them out), sorted and windowed. A query spanning a hierarchy notes
    /// the entity of each item.
    private func evaluateAll() throws(LoomError) -> [Entry] {
        guard spansHierarchy else { return try evaluateAll(query) }
        // Each part's first `offset + limit` entries hold the window of the merge.
        let window = query.fetchLimit.flatMap { limit in
            let (window, overflow) = query.fetchOffset.addingReportingOverflow(limit)
            return overflow ? nil : window
        }
        var merged: [(entry: Entry, part: Int)] = []
        for (i, part) in parts.enumerated() {
            var partQuery = part.query
            partQuery.fetchOffset = 0
            partQuery.fetchLimit = window
            for entry in try evaluateAll(partQuery) { merged.append((entry, i)) }
        }
        merged.sort { precedes($0.entry, $1.entry) }
        let start = min(query.fetchOffset, merged.count)
        let end = query.fetchLimit.map { min(start + $0, merged.count) } ?? merged.count
        var names: [Int64: String] = [:]
        names.reserveCapacity(end - start)
        for (entry, part) in merged[start..<end] {
            // Keys are unique within a hierarchy (checked when the query started); an object
            // inserted since cannot share one, but say so rather than list one object twice.
            if let other = names.updateValue(parts[part].entity.name, forKey: entry.key) {
                throw LoomError(.invalidRequest, "A live query of \(query.entity.name) found \(other)/\(entry.key) and \(parts[part].entity.name)/\(entry.key), two objects of one hierarchy with the same key, which it cannot tell apart.", entity: query.entity.name)
            }
        }
        entityNames = names
        return merged[start..<end].map(\.entry)
    }

    /// The whole result of `query`, one entity's.
    private func evaluateAll(_ query: StoreQuery) throws(LoomError) -> [Entry] {
        let rows: [StoreRow]
        if includesPendingChanges && context.hasPendingChanges(affecting: query) {
            rows = try context.matchingRows(query).map(\.row)
        } else if context.parent == nil && !SortKey.usesRelationships(query.sortKeys) {
            return try storeEntries(query)
        } else {
            rows = try context.rowSource.baseFetch(query)
        }
        if !SortKey.usesRelationships(query.sortKeys) {
            // The sort values are the rows' own.
            let indexes = query.sortKeys.map(\.attributeIndex)
            return rows.map { row in Entry(key: row.key, values: indexes.map { row.values[$0] }) }
        }
        let graph = ContextGraph(context)
        let graphRows = rows.map { graph.remember(query.entity, $0) }
        warm(graph, for: graphRows, query: query, predicate: false)
        let sortNodes = query.sortKeys.map(\.valueNode)
        let result = graphRows.map { row in Entry(key: row.key, values: sortNodes.map { $0.evaluate(row, in: graph) }) }
        if let failure = graph.failure { throw failure }
        return result
    }

    /// The whole result as the store has it (what ``RowSource/baseFetch(_:)`` reads
    /// for a root context), reading only the keys and sort values: one values query with the
    /// fetch's predicate, order (the sort keys, then the primary key) and window, which an
    /// index on the sort keys answers without the rows. A value the attribute cannot hold is
    /// reported as a fetch reports it.
    private func storeEntries(_ query: StoreQuery) throws(LoomError) -> [Entry] {
        let entity = query.entity
        let columns: [AggregateQuery.Column] = [.value(.primaryKey)] + query.sortKeys.map { .value(.attribute($0.attributeIndex)) }
        let sortKeys = query.sortKeys.indices.map { AggregateQuery.SortKey(column: $0 + 1, ascending: query.sortKeys[$0].ascending) }
        let values = AggregateQuery(entity: entity, predicate: query.predicate, columns: columns, sortKeys: sortKeys,
                                    fetchOffset: query.fetchOffset, fetchLimit: query.fetchLimit)
        var rows = try (context.pinnedSnapshot() ?? context.coordinator.store as any StoreReading).aggregate(values)
        let kinds = query.sortKeys.map { entity.attributeKinds[$0.attributeIndex] }
        var entries: [Entry] = []
        entries.reserveCapacity(rows.count)
        for r in rows.indices {
            // Taken out of `rows`, the row's array is unique: the key is removed from it in
            // place, and the rest becomes the entry's values.
            var row: [StoredValue] = []
            swap(&row, &rows[r])
            guard row.count == kinds.count + 1, case .integer(let key) = row.removeFirst() else {
                throw LoomError(.corruptValue, "The store returned a malformed row for a live query of \(entity.name).", entity: entity.name)
            }
            for (i, kind) in kinds.enumerated() where !kind.type.accepts(row[i]) || (row[i].isNull && !kind.isOptional) {
                let attribute = entity.attributes[query.sortKeys[i].attributeIndex]
                throw LoomError(
                    .corruptValue,
                    "\(entity.name)/\(key).\(attribute.name) holds a stored \(row[i].kindName), which is not a valid \(attribute.isOptional ? "optional " : "")\(attribute.type.rawValue); the row was changed outside Loom.",
                    entity: entity.name, attributes: [attribute.name],
                    objectID: AnyObjectID(storeIdentifier: context.coordinator.storeIdentifier, entityName: entity.name, primaryKey: key))
            }
            entries.append(Entry(key: key, values: row))
        }
        return entries
    }

    /// Loads, one query per relationship, what `query`'s predicate (unless `predicate` is
    /// false) and sort keys read at their first step.
    private func warm(_ graph: ContextGraph, for rows: [ContextGraph.Row], query: StoreQuery, predicate: Bool = true) {
        guard !rows.isEmpty else { return }
        let schema = context.coordinator.schema
        let paths = (predicate ? query.predicate?.relationshipPaths ?? [] : []) + query.sortKeys.map(\.relationshipPath)
        var warmed: Set<RelationshipReference> = []
        for path in paths {
            guard let first = path.first, warmed.insert(first).inserted, let r = schema.relationship(first) else { continue }
            if r.description.isToMany { graph.warmMembers(r, of: rows.map(\.key)) } else { graph.warmDestinations(r, of: rows) }
        }
    }

    /// The order of the query: its sort keys, then the primary key.
    private func precedes(_ a: Entry, _ b: Entry) -> Bool {
        for (i, key) in query.sortKeys.enumerated() {
            let c = StoredValue.compare(a.values[i], b.values[i])
            if c != 0 { return key.ascending ? c < 0 : c > 0 }
        }
        return a.key < b.key
    }

    /// The result in sections: runs of equal section keys (one section, maybe empty, without
    /// sections).
    func snapshot() -> LiveSnapshot {
        guard sectioned else { return LiveSnapshot([.init(key: .whole, items: entries.map(\.key))]) }
        var sections: [LiveSnapshot.Section] = []
        for entry in entries {
            let identity = SectionIdentity(value: entry.values[0])
            if sections.last?.key == identity {
                sections[sections.count - 1].items.append(entry.key)
            } else {
                sections.append(.init(key: identity, items: [entry.key]))
            }
        }
        return LiveSnapshot(sections)
    }
}

extension PredicateNode {
    /// Adds the properties this node reads, evaluated on `entity`, to `reads` (by entity
    /// name), and the entities it reaches through relationships to `related`. A relationship
    /// counts on both sides: its own name on the source, its inverse's on the destination,
    /// whichever side a change reports.
    func collectReads(of entity: EntityDescription, in schema: Schema, into reads: inout [String: Set<String>], related: inout Set<String>) {
        func follow(_ reference: RelationshipReference, _ inner: PredicateNode?) {
            reads[entity.name, default: []].insert(reference.name)
            guard let r = schema.relationship(reference) else { return }
            // A destination with sub-entities: a change to an object of any of them counts.
            for destination in [r.destination] + schema.concreteEntities(of: r.destination).filter({ $0 !== r.destination }) where r.leadsToSubentities || destination === r.destination {
                related.insert(destination.name)
                reads[destination.name, default: []].insert(r.inverse.name)
                inner?.collectReads(of: destination, in: schema, into: &reads, related: &related)
            }
        }
        switch self {
        case .attribute(let i):
            if i < entity.storedValueCount { reads[entity.name, default: []].insert(entity.storedValueName(at: i)) }
        case .constant, .primaryKey: break
        case .compare(_, let a, let b), .and(let a, let b), .or(let a, let b), .coalesce(let a, let b),
             .nullPropagating(let a, let b), .string(_, let a, let b), .arithmetic(_, let a, let b):
            a.collectReads(of: entity, in: schema, into: &reads, related: &related)
            b.collectReads(of: entity, in: schema, into: &reads, related: &related)
        case .not(let a), .lowercase(let a), .length(let a), .negate(let a), .isIn(let a, _):
            a.collectReads(of: entity, in: schema, into: &reads, related: &related)
        case .conditional(let a, let b, let c):
            a.collectReads(of: entity, in: schema, into: &reads, related: &related)
            b.collectReads(of: entity, in: schema, into: &reads, related: &related)
            c.collectReads(of: entity, in: schema, into: &reads, related: &related)
        case .toOne(let reference, let node), .anyRelated(let reference, let node), .allRelated(let reference, let node):
            follow(reference, node)
        case .relatedCount(let reference):
            follow(reference, nil)
        }
    }
}
