@_spi(LoomStore) package import LoomCore
package import LoomSQL

/// PostgreSQL's SQL, for ``SQLGenerator``, with Loom's (SQLite's) semantics: `$n` parameters,
/// `IS [NOT] DISTINCT FROM` as NULL-safe equality, key lists as one `int8[]` parameter
/// (`= ANY`), `LIMIT NULL` for "no limit", `ON CONFLICT DO NOTHING`, booleans turned into 0/1
/// wherever a value is expected, NULLs first when ascending, division by zero NULL, an average
/// always real, and text in code-point order (`COLLATE "C"` on every text column).
///
/// Strings: `contains`, `hasPrefix` and `hasSuffix` compare code points (`strpos`, `starts_with`,
/// `right`); lowercase and case-insensitive matching use ICU's root locale (`und-x-icu`), and
/// diacritic-insensitive matching the `unaccent` extension. Swift compares `Character`s with
/// canonical equivalence: strings that differ only in how an accent is composed (`é` as one code
/// point or as `e` and a combining mark) match in memory and not in PostgreSQL, as in SQLite's
/// `=`; Loom's own functions on SQLite follow Swift, so `contains` on such strings may differ
/// between the two stores.
package struct PostgreSQLDialect: SQLDialect {
    package init() {}

    package func placeholder(_ index: Int) -> String { "$\(index)" }

    package func nullSafeComparison(_ a: String, equal: Bool, _ b: String) -> String {
        "\(a) IS \(equal ? "NOT " : "")DISTINCT FROM \(b)"
    }

    package func comparison(_ a: String, equal: Bool, toNonNull b: String) -> String {
        equal ? "\(a) = \(b) AND \(a) IS NOT NULL" : "\(a) <> \(b) OR \(a) IS NULL"
    }

    package func isInKeyList(_ column: String, _ placeholder: String) -> String {
        "\(column) = ANY(\(placeholder)::int8[])"
    }

    package var unlimited: StoredValue { .null }

    package func insertIgnoringExisting(into table: String, columns: [String], values: [String]) -> String {
        "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", "))) ON CONFLICT DO NOTHING"
    }

    package func columnType(_ type: AttributeType) -> String {
        switch ColumnKind.of(type) {
        case .integer: "BIGINT"
        case .real: "DOUBLE PRECISION"
        case .text: "TEXT COLLATE \"C\""
        case .bytes: "BYTEA"
        }
    }

    package func parameter(_ placeholder: String, ofColumnType type: String) -> String {
        // A collation is not part of a type in a cast; the column keeps its own.
        let bare = type.range(of: " COLLATE").map { String(type[..<$0.lowerBound]) } ?? type
        return "CAST(\(placeholder) AS \(bare))"
    }

    package func renamingTableIndexes(from: String, to: String) -> [String] {
        ["ALTER INDEX \(SQLGenerator.quote(from + "_pkey")) RENAME TO \(SQLGenerator.quote(to + "_pkey"))"]
    }

    /// One function and one trigger per member table; `UPDATE OF` the constraint's columns only.
    package func hierarchyConstraintTriggers(_ t: HierarchyConstraintTriggers) -> [String] {
        [
            "CREATE OR REPLACE FUNCTION \(t.name)() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                + "IF TG_OP = 'INSERT' THEN \(t.insertNew); ELSIF TG_OP = 'UPDATE' THEN \(t.updateNew); ELSE \(t.deleteOld); END IF; "
                + "RETURN NULL; END $$",
            "CREATE TRIGGER \(t.name) AFTER INSERT OR UPDATE OF \(t.memberColumns.joined(separator: ", ")) OR DELETE ON \(t.table) FOR EACH ROW EXECUTE FUNCTION \(t.name)()",
        ]
    }

    /// Dropping the function drops its trigger with it.
    package func droppingHierarchyConstraintTriggers(_ t: HierarchyConstraintTriggers) -> [String] {
        ["DROP FUNCTION IF EXISTS \(t.name)() CASCADE"]
    }

    package var primaryKeyDefinition: String { "BIGINT PRIMARY KEY" }
    package var integerType: String { "BIGINT" }
    package var orderType: String { "BYTEA" }
    package var joinTableOptions: String { "" }

    package func stringTest(_ op: PredicateNode.StringOperator, _ a: String, _ b: String) -> String {
        switch op {
        case .contains: "(strpos(\(a), \(b)) > 0)"
        case .hasPrefix: "starts_with(\(a), \(b))"
        case .hasSuffix: "(right(\(a), length(\(b))) = \(b))"
        case .containsIgnoringCaseAndDiacritics:
            "(strpos(lower(unaccent(\(a)) COLLATE \"und-x-icu\"), lower(unaccent(\(b)) COLLATE \"und-x-icu\")) > 0)"
        }
    }

    package func lowercase(_ a: String) -> String { "(lower((\(a)) COLLATE \"und-x-icu\") COLLATE \"C\")" }
    package func length(_ a: String) -> String { "length(\(a))" }

    package func condition(_ value: String) -> String { "((\(value)) <> 0)" }
    package func value(ofCondition condition: String) -> String { "((\(condition))::int4::int8)" }

    package func orderTerm(_ expression: String, ascending: Bool) -> String {
        ascending ? "\(expression) ASC NULLS FIRST" : "\(expression) DESC NULLS LAST"
    }

    package func arithmetic(_ op: PredicateNode.ArithmeticOperator, _ a: String, _ b: String) -> String {
        switch op {
        case .divide: "(\(a) / NULLIF(\(b), 0))"
        case .remainder: "(\(a) % NULLIF(\(b), 0))"
        case .add: "(\(a) + \(b))"
        case .subtract: "(\(a) - \(b))"
        case .multiply: "(\(a) * \(b))"
        }
    }

    package func aggregate(_ name: String, _ value: String) -> String {
        name == "AVG" ? "(AVG(\(value))::float8)" : "\(name)(\(value))"
    }

    package var never: String { "false" }
    package var groupsThroughSubquery: Bool { true }
}
