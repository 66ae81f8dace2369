/// One ordering term: an attribute, ascending or descending, of the fetched object or of an
/// object a chain of to-one relationships leads to. Stores break ties by primary key, so every
/// order is total and the same on every store.
@_spi(LoomStore) public struct SortKey: Sendable, Hashable {
    /// The attribute's position in its entity: the fetched entity, or the last relationship's
    /// destination.
    public var attributeIndex: Int
    public var ascending: Bool
    /// The to-one relationships that lead to the attribute's object; empty for the fetched
    /// object's own attribute. An empty relationship sorts as NULL (first when ascending).
    public var relationshipPath: [RelationshipReference]

    public init(attributeIndex: Int, ascending: Bool, relationshipPath: [RelationshipReference] = []) {
        self.attributeIndex = attributeIndex
        self.ascending = ascending
        self.relationshipPath = relationshipPath
    }

    /// The value this key sorts by, as a node of the fetched entity.
    public var valueNode: PredicateNode {
        relationshipPath.reversed().reduce(PredicateNode.attribute(attributeIndex)) { .toOne($1, $0) }
    }

    /// Orders two rows by these keys, then by primary key. For keys without relationship paths.
    static func areInIncreasingOrder(_ keys: [SortKey], _ a: StoreRow, _ b: StoreRow) -> Bool {
        for key in keys {
            let c = StoredValue.compare(a.values[key.attributeIndex], b.values[key.attributeIndex])
            if c != 0 { return key.ascending ? c < 0 : c > 0 }
        }
        return a.key < b.key
    }

    /// How two items compare by these keys alone, given each key's value in order: negative,
    /// zero (a tie, for the caller to break) or positive.
    static func compare(_ keys: [SortKey], _ a: [StoredValue], _ b: [StoredValue]) -> Int {
        for (i, key) in keys.enumerated() {
            let c = StoredValue.compare(a[i], b[i])
            if c != 0 { return key.ascending ? c : -c }
        }
        return 0
    }

    /// Sorts items by these keys, then by primary key, reading each key's value once per item.
    static func sort<G: PredicateGraph, Item>(_ items: inout [Item], by keys: [SortKey], row: (Item) -> G.Row, in graph: G) {
        if keys.isEmpty {
            items.sort { graph.key(of: row($0)) < graph.key(of: row($1)) }
            return
        }
        let nodes = keys.map(\.valueNode)
        var decorated = items.map { item -> (values: [StoredValue], key: Int64, item: Item) in
            let r = row(item)
            return (nodes.map { $0.evaluate(r, in: graph) }, graph.key(of: r), item)
        }
        decorated.sort { a, b in
            let c = compare(keys, a.values, b.values)
            return c != 0 ? c < 0 : a.key < b.key
        }
        items = decorated.map(\.item)
    }

    /// Whether any key sorts through a relationship.
    static func usesRelationships(_ keys: [SortKey]) -> Bool {
        keys.contains { !$0.relationshipPath.isEmpty }
    }
}
