/// A store's rows as a predicate graph: how ``InMemoryStore`` (and any store without a query
/// language) evaluates predicates and sorts that reach related objects.
///
/// Not `Sendable`: built for one fetch, over a snapshot of the tables.
final class TableGraph: PredicateGraph {
    struct Row {
        let entity: EntityDescription
        let row: StoreRow
    }

    let schema: Schema
    let tables: [ObjectIdentifier: [Int64: StoreRow]]
    let links: [String: Set<InMemoryStore.Link>]
    private var resolved: [RelationshipReference: ResolvedRelationship] = [:]
    /// Destination rows by foreign key, built the first time a to-many is followed (by the
    /// relationship as the owner's entity has it).
    private var byForeignKey: [RelationshipReference: [Int64: [Row]]] = [:]
    /// Join-table partners by key, built the first time a many-to-many is followed.
    private var byLink: [String: [Int64: [Int64]]] = [:]

    init(schema: Schema, tables: [ObjectIdentifier: [Int64: StoreRow]], links: [String: Set<InMemoryStore.Link>]) {
        self.schema = schema
        self.tables = tables
        self.links = links
    }

    func key(of row: Row) -> Int64 { row.row.key }

    func value(_ index: Int, of row: Row) -> StoredValue { row.row.values[index] }

    /// The relationship a reference names, as `row`'s entity has it (a sub-entity has its
    /// parent's relationships in the same positions, its foreign keys at slots of its own).
    private func resolve(_ reference: RelationshipReference, of row: Row) -> ResolvedRelationship? {
        let r: ResolvedRelationship?
        if let known = resolved[reference] { r = known } else {
            r = schema.relationship(reference)
            resolved[reference] = r
        }
        guard let r, r.source !== row.entity, row.entity.isKind(of: r.source) else { return r }
        return schema.relationship(r.index, of: row.entity)
    }

    /// The row with `key` among `r`'s destinations: in its destination's table, or in one of
    /// its sub-entities' (a hierarchy's keys are its own).
    private func destinationRow(_ r: ResolvedRelationship, key: Int64) -> Row? {
        for narrowed in r.concreteDestinations(in: schema) {
            if let found = tables[ObjectIdentifier(narrowed.destination)]?[key] { return Row(entity: narrowed.destination, row: found) }
        }
        return nil
    }

    func destination(of row: Row, _ relationship: RelationshipReference) -> Row? {
        guard let r = resolve(relationship, of: row), case .foreignKey(let slot) = r.storage,
              case .integer(let key) = row.row.values[slot] else { return nil }
        return destinationRow(r, key: key)
    }

    func destinations(of row: Row, _ relationship: RelationshipReference) -> [Row] {
        guard let r = resolve(relationship, of: row) else { return [] }
        switch r.storage {
        case .foreignKey:
            return destination(of: row, relationship).map { [$0] } ?? []
        case .inverseForeignKey:
            if byForeignKey[r.reference] == nil {
                var index: [Int64: [Row]] = [:]
                for narrowed in r.concreteDestinations(in: schema) {
                    guard case .inverseForeignKey(let slot) = narrowed.storage else { continue }
                    for candidate in (tables[ObjectIdentifier(narrowed.destination)] ?? [:]).values {
                        if case .integer(let owner) = candidate.values[slot] { index[owner, default: []].append(Row(entity: narrowed.destination, row: candidate)) }
                    }
                }
                byForeignKey[r.reference] = index
            }
            return byForeignKey[r.reference]?[row.row.key] ?? []
        case .joinTable(let table, let ownColumn, _):
            let indexName = table.name + "." + ownColumn
            if byLink[indexName] == nil {
                var index: [Int64: [Int64]] = [:]
                for link in links[table.name] ?? [] {
                    if ownColumn == JoinTable.sourceColumn { index[link.source, default: []].append(link.target) }
                    else { index[link.target, default: []].append(link.source) }
                }
                byLink[indexName] = index
            }
            return (byLink[indexName]?[row.row.key] ?? []).compactMap { destinationRow(r, key: $0) }
        }
    }
}
