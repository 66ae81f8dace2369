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
    /// Destination rows by foreign key, built the first time a to-many is followed.
    private var byForeignKey: [RelationshipReference: [Int64: [StoreRow]]] = [:]
    /// Join-table partners by key, built the first time a many-to-many is followed.
    private var byLink: [RelationshipReference: [Int64: [Int64]]] = [:]

    init(schema: Schema, tables: [ObjectIdentifier: [Int64: StoreRow]], links: [String: Set<InMemoryStore.Link>]) {
        self.schema = schema
        self.tables = tables
        self.links = links
    }

    func key(of row: Row) -> Int64 { row.row.key }

    func value(_ index: Int, of row: Row) -> StoredValue { row.row.values[index] }

    private func resolve(_ reference: RelationshipReference) -> ResolvedRelationship? {
        if let r = resolved[reference] { return r }
        let r = schema.relationship(reference)
        resolved[reference] = r
        return r
    }

    func destination(of row: Row, _ relationship: RelationshipReference) -> Row? {
        guard let r = resolve(relationship), case .foreignKey(let slot) = r.storage,
              case .integer(let key) = row.row.values[slot],
              let destination = tables[ObjectIdentifier(r.destination)]?[key] else { return nil }
        return Row(entity: r.destination, row: destination)
    }

    func destinations(of row: Row, _ relationship: RelationshipReference) -> [Row] {
        guard let r = resolve(relationship) else { return [] }
        switch r.storage {
        case .foreignKey:
            return destination(of: row, relationship).map { [$0] } ?? []
        case .inverseForeignKey(let slot):
            if byForeignKey[relationship] == nil {
                var index: [Int64: [StoreRow]] = [:]
                for candidate in (tables[ObjectIdentifier(r.destination)] ?? [:]).values {
                    if case .integer(let owner) = candidate.values[slot] { index[owner, default: []].append(candidate) }
                }
                byForeignKey[relationship] = index
            }
            return (byForeignKey[relationship]?[row.row.key] ?? []).map { Row(entity: r.destination, row: $0) }
        case .joinTable(let table, let ownColumn, _):
            if byLink[relationship] == nil {
                var index: [Int64: [Int64]] = [:]
                for link in links[table.name] ?? [] {
                    if ownColumn == JoinTable.sourceColumn { index[link.source, default: []].append(link.target) }
                    else { index[link.target, default: []].append(link.source) }
                }
                byLink[relationship] = index
            }
            let table = tables[ObjectIdentifier(r.destination)] ?? [:]
            return (byLink[relationship]?[row.row.key] ?? []).compactMap { table[$0].map { Row(entity: r.destination, row: $0) } }
        }
    }
}
