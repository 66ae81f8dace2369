@_spi(LoomStore) package import LoomCore

/// What differs between the SQL databases Loom stores in: everything ``SQLGenerator`` asks
/// of a database beyond the SQL they share.
///
/// A store module supplies one (LoomSQLite's `SQLiteDialect`; PostgreSQL's later). The
/// generator writes every statement through it, so that the same table layout, predicate
/// translation and query shapes serve every SQL store, and each dialect's text is tested as
/// text.
package protocol SQLDialect: Sendable {
    /// The parameter marker for the `index`-th bound value of a statement, from 1: `?`
    /// (SQLite, positional) or `$1` (PostgreSQL).
    func placeholder(_ index: Int) -> String

    /// `a <op> b` that treats NULL as a value: true for two NULLs, false for NULL and a value
    /// (SQLite's `IS` / `IS NOT`, standard SQL's `IS [NOT] DISTINCT FROM`).
    func nullSafeComparison(_ a: String, equal: Bool, _ b: String) -> String
    /// ``nullSafeComparison(_:equal:_:)`` where `b` is a value known not to be NULL (a bound
    /// constant): the same truth, written so that an index on `a` serves it. SQLite's `IS` is
    /// indexed already; PostgreSQL's `IS NOT DISTINCT FROM` is not, so it writes `a = b AND a
    /// IS NOT NULL` (`a <> b OR a IS NULL`), which is never NULL either.
    func comparison(_ a: String, equal: Bool, toNonNull b: String) -> String

    /// A test that `column` is one of the keys bound, as one parameter, at `placeholder`
    /// (SQLite: a JSON array read with `json_each`; PostgreSQL: `= ANY` of an array).
    func isInKeyList(_ column: String, _ placeholder: String) -> String

    /// The value bound as a window's limit when a query has an offset but no limit.
    var unlimited: StoredValue { get }

    /// An `INSERT` that does nothing when the row already exists (`INSERT OR IGNORE`,
    /// `ON CONFLICT DO NOTHING`).
    func insertIgnoringExisting(into table: String, columns: [String], values: [String]) -> String

    /// The column type declared for an attribute type.
    func columnType(_ type: AttributeType) -> String
    /// The column types of a primary key, of a version or key column, and of an ordered
    /// to-many's order column.
    var primaryKeyDefinition: String { get }
    var integerType: String { get }
    var orderType: String { get }
    /// What follows a join table's definition (SQLite's `WITHOUT ROWID`), or "".
    var joinTableOptions: String { get }

    /// A string test with Loom's exact semantics (see `LoomStringFunctions`).
    func stringTest(_ op: PredicateNode.StringOperator, _ a: String, _ b: String) -> String
    /// Loom's lowercase of a string, and its length (characters of text, bytes of data).
    func lowercase(_ a: String) -> String
    func length(_ a: String) -> String

    /// A value used where SQL wants a truth value (`WHERE`, `CASE WHEN`, `AND`): SQLite takes
    /// any value (non-zero is true); PostgreSQL wants a boolean (`(v) <> 0`).
    func condition(_ value: String) -> String
    /// A truth value used as a value (compared, sorted, returned): SQLite's comparisons are
    /// already integers 0/1; PostgreSQL's booleans become them.
    func value(ofCondition condition: String) -> String
    /// One `ORDER BY` term with Loom's order: NULLs first when ascending, last when descending
    /// (SQLite's; PostgreSQL needs `NULLS FIRST`/`NULLS LAST`).
    func orderTerm(_ expression: String, ascending: Bool) -> String
    /// `a <op> b` with SQLite's arithmetic: division (and remainder) by zero is NULL.
    func arithmetic(_ op: PredicateNode.ArithmeticOperator, _ a: String, _ b: String) -> String
    /// An aggregate function applied to a value: `COUNT`, `SUM`, `MIN`, `MAX`, `AVG` (an average
    /// is always real, as in SQLite).
    func aggregate(_ name: String, _ value: String) -> String
    /// A condition that is never true: the placeholder of a statement that must return nothing.
    var never: String { get }
    /// Whether grouped queries compute their values in a subquery and group outside it (see
    /// `SQLGenerator.groupedThroughSubquery`): PostgreSQL's rule for grouped columns needs it.
    var groupsThroughSubquery: Bool { get }
    /// A parameter whose type the statement does not give (a value selected into a column):
    /// SQLite takes any value; PostgreSQL casts it to the column's type.
    func parameter(_ placeholder: String, ofColumnType type: String) -> String
    /// What follows `ALTER TABLE from RENAME TO to` so that the table's own index names follow
    /// it: PostgreSQL names a primary key's index after the table it was made for and keeps that
    /// name (a rebuilt table's would stay `loom_migrating_…_pkey`, the next one numbered);
    /// SQLite needs nothing.
    func renamingTableIndexes(from: String, to: String) -> [String]
    /// The statements that make the triggers keeping a hierarchy constraint's table in step with
    /// one of its member tables (see ``SQLGenerator/hierarchyConstraintStatements()``), and
    /// those that drop them (when they exist).
    func hierarchyConstraintTriggers(_ triggers: HierarchyConstraintTriggers) -> [String]
    func droppingHierarchyConstraintTriggers(_ triggers: HierarchyConstraintTriggers) -> [String]
}

extension SQLDialect {
    package func condition(_ value: String) -> String { value }
    package func value(ofCondition condition: String) -> String { condition }
    package func orderTerm(_ expression: String, ascending: Bool) -> String { "\(expression) \(ascending ? "ASC" : "DESC")" }
    package func arithmetic(_ op: PredicateNode.ArithmeticOperator, _ a: String, _ b: String) -> String {
        "(\(a) \(op.sqlSymbol) \(b))"
    }
    package func aggregate(_ name: String, _ value: String) -> String { "\(name)(\(value))" }
    package var never: String { "0" }
    package var groupsThroughSubquery: Bool { false }
    package func parameter(_ placeholder: String, ofColumnType type: String) -> String { placeholder }
    package func comparison(_ a: String, equal: Bool, toNonNull b: String) -> String { nullSafeComparison(a, equal: equal, b) }
    package func renamingTableIndexes(from: String, to: String) -> [String] { [] }
}

extension PredicateNode.ArithmeticOperator {
    /// The operator's SQL symbol.
    package var sqlSymbol: String {
        switch self {
        case .add: "+"
        case .subtract: "-"
        case .multiply: "*"
        case .divide: "/"
        case .remainder: "%"
        }
    }
}
