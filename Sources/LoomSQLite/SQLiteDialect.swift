@_spi(LoomStore) package import LoomCore
package import LoomSQL

/// SQLite's SQL, for ``SQLGenerator``: positional `?` parameters, `IS` as NULL-safe equality,
/// key lists as one JSON array read with `json_each`, `LIMIT -1` for "no limit", `INSERT OR
/// IGNORE`, SQLite's type affinities, and Loom's string functions registered on every
/// connection (``SQLFunctions``).
package struct SQLiteDialect: SQLDialect {
    package init() {}

    package func placeholder(_ index: Int) -> String { "?" }

    package func nullSafeComparison(_ a: String, equal: Bool, _ b: String) -> String {
        "\(a) \(equal ? "IS" : "IS NOT") \(b)"
    }

    package func isInKeyList(_ column: String, _ placeholder: String) -> String {
        "\(column) IN (SELECT value FROM json_each(\(placeholder)))"
    }

    package var unlimited: StoredValue { .integer(-1) }

    package func insertIgnoringExisting(into table: String, columns: [String], values: [String]) -> String {
        "INSERT OR IGNORE INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))"
    }

    package func columnType(_ type: AttributeType) -> String {
        switch type {
        case .bool, .integer16, .integer32, .integer64: "INTEGER"
        case .double, .float, .date: "REAL"
        case .string, .url, .decimal: "TEXT"
        case .binary, .uuid, .codable: "BLOB"
        }
    }

    package var primaryKeyDefinition: String { "INTEGER PRIMARY KEY" }
    package var integerType: String { "INTEGER" }
    package var orderType: String { "BLOB" }
    package var joinTableOptions: String { "WITHOUT ROWID" }

    package func stringTest(_ op: PredicateNode.StringOperator, _ a: String, _ b: String) -> String {
        "\(SQLFunctions.name(of: op))(\(a), \(b))"
    }

    package func lowercase(_ a: String) -> String { "loom_lower(\(a))" }
    package func length(_ a: String) -> String { "loom_length(\(a))" }

    package func hierarchyConstraintTriggers(_ t: HierarchyConstraintTriggers) -> [String] {
        [
            "CREATE TRIGGER \(trigger(t, "insert")) AFTER INSERT ON \(t.table) BEGIN \(t.insertNew); END",
            "CREATE TRIGGER \(trigger(t, "update")) AFTER UPDATE OF \(t.memberColumns.joined(separator: ", ")) ON \(t.table) BEGIN \(t.updateNew); END",
            "CREATE TRIGGER \(trigger(t, "delete")) AFTER DELETE ON \(t.table) BEGIN \(t.deleteOld); END",
        ]
    }

    package func droppingHierarchyConstraintTriggers(_ t: HierarchyConstraintTriggers) -> [String] {
        ["insert", "update", "delete"].map { "DROP TRIGGER IF EXISTS \(trigger(t, $0))" }
    }

    private func trigger(_ t: HierarchyConstraintTriggers, _ event: String) -> String {
        SQLGenerator.quote("\(t.nameText)_\(event)")
    }
}
