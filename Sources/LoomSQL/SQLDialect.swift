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
}
