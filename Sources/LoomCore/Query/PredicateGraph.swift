/// Where a predicate evaluated in memory finds an object's values and the objects it relates
/// to: a store's tables, or a context's objects with their unsaved changes.
protocol PredicateGraph {
    associatedtype Row
    func key(of row: Row) -> Int64
    func value(_ index: Int, of row: Row) -> StoredValue
    /// The object a to-one relationship of `row` leads to, if any.
    func destination(of row: Row, _ relationship: RelationshipReference) -> Row?
    /// The objects a to-many relationship of `row` holds.
    func destinations(of row: Row, _ relationship: RelationshipReference) -> [Row]
}

/// One object's values without relationships: relationship nodes see none.
struct FlatPredicateGraph: PredicateGraph {
    let rowKey: Int64
    let values: (Int) -> StoredValue
    func key(of row: Void) -> Int64 { rowKey }
    func value(_ index: Int, of row: Void) -> StoredValue { values(index) }
    func destination(of row: Void, _ relationship: RelationshipReference) -> Void? { nil }
    func destinations(of row: Void, _ relationship: RelationshipReference) -> [Void] { [] }
}
