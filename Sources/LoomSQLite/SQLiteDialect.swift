public import LoomCore
public import LoomSQL

/// SQLite's SQL, for ``SQLGenerator``: positional `?` parameters, `IS` as NULL-safe equality,
/// key lists as one JSON array read with `json_each`, `LIMIT -1` for "no limit", `INSERT OR
/// IGNORE`, SQLite's type affinities, and Loom's string functions registered on every
/// connection (``SQLFunctions``).
public struct SQLiteDialect: SQLDialect {
    public init() {}

    public func placeholder(_ index: Int) -> String { "?" }

    public func nullSafeComparison(_ a: String, equal: Bool, _ b: String) -> String {
        "\(a) \(equal ? "IS" : "IS NOT") \(b)"
    }

    public func isInKeyList(_ column: String, _ placeholder: String) -> String {
        "\(column) IN (SELECT value FROM json_each(\(placeholder)))"
    }

    public var unlimited: StoredValue { .integer(-1) }

    public func insertIgnoringExisting(into table: String, columns: [String], values: [String]) -> String {
        "INSERT OR IGNORE INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))"
    }

    public func columnType(_ type: AttributeType) -> String {
        switch type {
        case .bool, .integer16, .integer32, .integer64: "INTEGER"
        case .double, .float, .date: "REAL"
        case .string, .url, .decimal: "TEXT"
        case .binary, .uuid, .codable: "BLOB"
        }
    }

    public var primaryKeyDefinition: String { "INTEGER PRIMARY KEY" }
    public var integerType: String { "INTEGER" }
    public var orderType: String { "BLOB" }
    public var joinTableOptions: String { "WITHOUT ROWID" }

    public func stringTest(_ op: PredicateNode.StringOperator, _ a: String, _ b: String) -> String {
        "\(SQLFunctions.name(of: op))(\(a), \(b))"
    }

    public func lowercase(_ a: String) -> String { "loom_lower(\(a))" }
    public func length(_ a: String) -> String { "loom_length(\(a))" }
}
