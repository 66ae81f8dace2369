import Foundation
import LoomCore
import GRDB
import GRDBSQLite

/// Writes the SQL a store runs, from entities and ``PredicateNode``s. Identifiers are quoted;
/// values are never spliced into SQL text, only bound as parameters.
struct SQLGenerator: Sendable {
    let schema: Schema
    /// The statements of each entity that do not depend on a query, built once: a save or a
    /// lookup reuses the same text (and so the same cached prepared statement) for every row.
    private var texts: [ObjectIdentifier: EntityTexts]

    /// One entity's fixed statements.
    struct EntityTexts: Sendable {
        /// `"Z_PK", "Z_OPT", <columns>` unqualified, and qualified by the alias `t0`.
        let columns: String
        let aliasedColumns: String
        let insert: String
        let delete: String
        /// Rows by a JSON array of keys, and one row by key.
        let selectByKeys: String
        let selectByKey: String
        /// For each to-many relationship, by index: its destinations for a JSON array of owners.
        var selectRelated: [Int: String] = [:]
        /// The same for one owner, bound as an integer: a to-many fault firing. `IN (SELECT
        /// value FROM json_each(?))` makes SQLite build an ephemeral table for every query,
        /// which was a fifth of such a query's cost.
        var selectRelatedToOwner: [Int: String] = [:]
    }

    init(schema: Schema) {
        self.schema = schema
        var texts: [ObjectIdentifier: EntityTexts] = [:]
        for entity in schema.entities {
            texts[ObjectIdentifier(entity)] = Self.makeTexts(entity)
        }
        self.texts = texts
        for entity in schema.entities {
            for j in entity.relationships.indices {
                let r = schema.relationship(j, of: entity)
                if case .foreignKey = r.storage { continue }
                let (many, one) = (makeSelectRelated(r, oneOwner: false), makeSelectRelated(r, oneOwner: true))
                self.texts[ObjectIdentifier(entity)]?.selectRelated[j] = many
                self.texts[ObjectIdentifier(entity)]?.selectRelatedToOwner[j] = one
            }
        }
    }

    private static func makeTexts(_ entity: EntityDescription) -> EntityTexts {
        let table = quote(entity.name)
        let names = ["Z_PK", "Z_OPT"] + (0..<entity.storedValueCount).map(entity.columnName(at:))
        let columns = names.map(quote).joined(separator: ", ")
        let inserted = (["Z_PK"] + (0..<entity.storedValueCount).map(entity.columnName(at:)) + ["Z_OPT"]).map(quote)
        let values = Array(repeating: "?", count: entity.storedValueCount + 1) + ["1"]
        return EntityTexts(
            columns: columns,
            aliasedColumns: names.map { "t0." + quote($0) }.joined(separator: ", "),
            insert: "INSERT INTO \(table) (\(inserted.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))",
            delete: "DELETE FROM \(table) WHERE \"Z_PK\" = ? AND \"Z_OPT\" = ?",
            selectByKeys: "SELECT \(columns) FROM \(table) WHERE \"Z_PK\" IN (SELECT value FROM json_each(?))",
            selectByKey: "SELECT \(columns) FROM \(table) WHERE \"Z_PK\" = ?")
    }

    /// The fixed statements of `entity` (built now for an entity outside the schema).
    func texts(_ entity: EntityDescription) -> EntityTexts {
        texts[ObjectIdentifier(entity)] ?? Self.makeTexts(entity)
    }

    static func quote(_ identifier: String) -> String {
        // Schema validation refuses names with quotes; escape anyway, for names read from files.
        if !identifier.utf8.contains(UInt8(ascii: "\"")) { return "\"" + identifier + "\"" }
        return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    func columns(_ entity: EntityDescription, alias: String? = nil) -> String {
        guard let alias else { return texts(entity).columns }
        if alias == "t0" { return texts(entity).aliasedColumns }
        return (["Z_PK", "Z_OPT"] + (0..<entity.storedValueCount).map(entity.columnName(at:)))
            .map { alias + "." + Self.quote($0) }.joined(separator: ", ")
    }

    /// The quoted column of a slot.
    func column(_ entity: EntityDescription, _ slot: Int) -> String {
        Self.quote(entity.columnName(at: slot))
    }

    // MARK: DDL

    func createStatements() -> [String] {
        var statements: [String] = []
        for entity in schema.entities {
            var definitions = ["\"Z_PK\" INTEGER PRIMARY KEY", "\"Z_OPT\" INTEGER NOT NULL"]
            for slot in 0..<entity.storedValueCount {
                switch entity.storedValue(at: slot) {
                case .attribute(let attribute):
                    definitions.append("\(column(entity, slot)) \(attribute.type.sqlType)\(attribute.isOptional ? "" : " NOT NULL")")
                case .foreignKey:
                    // Nullable even when required: Loom checks required relationships at save.
                    definitions.append("\(column(entity, slot)) INTEGER")
                case .order:
                    definitions.append("\(column(entity, slot)) BLOB")
                }
            }
            statements.append("CREATE TABLE \(Self.quote(entity.name)) (\(definitions.joined(separator: ", ")))")
            for constraint in entity.uniquenessConstraints {
                let name = Self.quote("loom_unique_\(entity.name)_\(constraint.joined(separator: "_"))")
                statements.append("CREATE UNIQUE INDEX \(name) ON \(Self.quote(entity.name)) (\(constraintColumns(entity, constraint)))")
            }
        }
        for table in schema.joinTables {
            let source = Self.quote(JoinTable.sourceColumn), target = Self.quote(JoinTable.targetColumn)
            statements.append("CREATE TABLE \(Self.quote(table.name)) (\(source) INTEGER NOT NULL, \(target) INTEGER NOT NULL, PRIMARY KEY (\(source), \(target))) WITHOUT ROWID")
            statements.append("CREATE INDEX \(Self.quote("loom_join_\(table.name)_target")) ON \(Self.quote(table.name)) (\(target), \(source))")
        }
        return statements + indexStatements()
    }

    /// Columns of a constraint or index, whose names are attributes or to-one relationships.
    func constraintColumns(_ entity: EntityDescription, _ names: [String]) -> String {
        names.map { name in entity.storedValueIndex(named: name).map { column(entity, $0) } ?? Self.quote(name) }.joined(separator: ", ")
    }

    func indexStatements() -> [String] {
        schema.entities.flatMap { entity in
            var statements = entity.indexes.map { index in
                let name = Self.quote("loom_index_\(entity.name)_\(index.joined(separator: "_"))")
                return "CREATE INDEX IF NOT EXISTS \(name) ON \(Self.quote(entity.name)) (\(constraintColumns(entity, index)))"
            }
            // Every foreign key is indexed: to-many faults, prefetches and joins look rows up by it.
            for (j, relationship) in entity.relationships.enumerated() where relationship.kind == .toOne {
                guard let slot = entity.storedValueIndex(ofRelationship: j) else { continue }
                let name = Self.quote("loom_fk_\(entity.name)_\(relationship.name)")
                statements.append("CREATE INDEX IF NOT EXISTS \(name) ON \(Self.quote(entity.name)) (\(column(entity, slot)))")
            }
            return statements
        }
    }

    // MARK: DML

    func insert(_ entity: EntityDescription) -> String { texts(entity).insert }

    func update(_ entity: EntityDescription, columns indexes: [Int]) -> String {
        let sets = indexes.map { "\(column(entity, $0)) = ?" } + ["\"Z_OPT\" = \"Z_OPT\" + 1"]
        return "UPDATE \(Self.quote(entity.name)) SET \(sets.joined(separator: ", ")) WHERE \"Z_PK\" = ? AND \"Z_OPT\" = ?"
    }

    func insertLink(_ table: JoinTable) -> String {
        "INSERT OR IGNORE INTO \(Self.quote(table.name)) (\"Z_SOURCE\", \"Z_TARGET\") VALUES (?, ?)"
    }

    func deleteLink(_ table: JoinTable) -> String {
        "DELETE FROM \(Self.quote(table.name)) WHERE \"Z_SOURCE\" = ? AND \"Z_TARGET\" = ?"
    }

    func deleteLinks(_ table: JoinTable, column: String) -> String {
        "DELETE FROM \(Self.quote(table.name)) WHERE \(Self.quote(column)) = ?"
    }

    func delete(_ entity: EntityDescription) -> String { texts(entity).delete }

    // MARK: Queries

    /// The text and arguments of one statement being built; makes table aliases.
    struct Builder {
        var arguments: [StoredValue] = []
        private var aliases = 0

        mutating func alias() -> String {
            aliases += 1
            return "t\(aliases)"
        }

        /// Appends ` LIMIT ? OFFSET ?` and its two values when the query has a window.
        mutating func appendWindow(to text: inout String, limit: Int?, offset: Int) {
            guard limit != nil || offset > 0 else { return }
            text += " LIMIT ? OFFSET ?"
            arguments.append(.integer(limit.map(Int64.init) ?? -1))
            arguments.append(.integer(Int64(offset)))
        }
    }

    func select(_ query: StoreQuery) -> (String, [StoredValue]) {
        select(query, resultColumns: columns(query.entity, alias: "t0"))
    }

    /// A query's statement returning `resultColumns` (of the row aliased `t0`) for each match.
    func select(_ query: StoreQuery, resultColumns: String) -> (String, [StoredValue]) {
        var builder = Builder()
        var text = "SELECT \(resultColumns) FROM \(Self.quote(query.entity.name)) AS t0"
        if let predicate = query.predicate {
            text += " WHERE " + expression(predicate, query.entity, "t0", &builder)
        }
        var order: [String] = []
        for key in query.sortKeys {
            order.append("\(expression(key.valueNode, query.entity, "t0", &builder)) \(key.ascending ? "ASC" : "DESC")")
        }
        text += " ORDER BY " + (order + ["t0.\"Z_PK\""]).joined(separator: ", ")
        builder.appendWindow(to: &text, limit: query.fetchLimit, offset: query.fetchOffset)
        return (text, builder.arguments)
    }

    func count(_ query: StoreQuery) -> (String, [StoredValue]) {
        var builder = Builder()
        var inner = "SELECT 1 FROM \(Self.quote(query.entity.name)) AS t0"
        if let predicate = query.predicate {
            inner += " WHERE " + expression(predicate, query.entity, "t0", &builder)
        }
        builder.appendWindow(to: &inner, limit: query.fetchLimit, offset: query.fetchOffset)
        return ("SELECT COUNT(*) FROM (\(inner))", builder.arguments)
    }

    /// Rows by primary key. The keys are one parameter, a JSON array, so that any number of
    /// keys is one statement (and one cached statement).
    func selectByKeys(_ entity: EntityDescription) -> String { texts(entity).selectByKeys }

    /// One row by primary key: the common case of a lookup, without JSON.
    func selectByKey(_ entity: EntityDescription) -> String { texts(entity).selectByKey }

    /// The rows a to-many relationship leads to for a JSON array of owner keys, each with its
    /// owner's key first.
    func selectRelated(_ relationship: ResolvedRelationship) -> String {
        texts(relationship.source).selectRelated[relationship.index] ?? makeSelectRelated(relationship, oneOwner: false)
    }

    /// ``selectRelated(_:)`` for one owner, whose key is bound as an integer.
    func selectRelatedToOwner(_ relationship: ResolvedRelationship) -> String {
        texts(relationship.source).selectRelatedToOwner[relationship.index] ?? makeSelectRelated(relationship, oneOwner: true)
    }

    private func makeSelectRelated(_ relationship: ResolvedRelationship, oneOwner: Bool) -> String {
        let destination = Self.quote(relationship.destination.name)
        let owners = oneOwner ? "= ?" : "IN (SELECT value FROM json_each(?))"
        switch relationship.storage {
        case .inverseForeignKey(let slot):
            let fk = column(relationship.destination, slot)
            let order = oneOwner ? "d.\"Z_PK\"" : "d.\(fk), d.\"Z_PK\""
            return "SELECT d.\(fk), \(columns(relationship.destination, alias: "d")) FROM \(destination) AS d WHERE d.\(fk) \(owners) ORDER BY \(order)"
        case .joinTable(let table, let own, let other):
            let order = oneOwner ? "d.\"Z_PK\"" : "j.\(Self.quote(own)), d.\"Z_PK\""
            return "SELECT j.\(Self.quote(own)), \(columns(relationship.destination, alias: "d")) FROM \(Self.quote(table.name)) AS j JOIN \(destination) AS d ON d.\"Z_PK\" = j.\(Self.quote(other)) WHERE j.\(Self.quote(own)) \(owners) ORDER BY \(order)"
        case .foreignKey:
            return "SELECT NULL WHERE 0"
        }
    }

    /// The `FROM … WHERE …` that finds the objects of to-many `r` of the row aliased `owner`,
    /// aliased `alias`: through the destinations' foreign key, or through the join table.
    func relatedSource(_ r: ResolvedRelationship, owner: String, alias: String, _ builder: inout Builder) -> (from: String, link: String) {
        let destination = Self.quote(r.destination.name)
        switch r.storage {
        case .inverseForeignKey(let slot):
            return ("\(destination) AS \(alias)", "\(alias).\(column(r.destination, slot)) = \(owner).\"Z_PK\"")
        case .joinTable(let table, let own, let other):
            let join = builder.alias()
            return ("\(Self.quote(table.name)) AS \(join) JOIN \(destination) AS \(alias) ON \(alias).\"Z_PK\" = \(join).\(Self.quote(other))",
                    "\(join).\(Self.quote(own)) = \(owner).\"Z_PK\"")
        case .foreignKey(let slot):
            return ("\(destination) AS \(alias)", "\(alias).\"Z_PK\" = \(owner).\(column(r.source, slot))")
        }
    }

    /// SQL for a predicate node evaluated on the row aliased `alias` of `entity`; constants
    /// become `?` with their value appended to the builder's arguments, in text order.
    func expression(_ node: PredicateNode, _ entity: EntityDescription, _ alias: String, _ builder: inout Builder) -> String {
        func sub(_ n: PredicateNode) -> String { expression(n, entity, alias, &builder) }
        switch node {
        case .constant(let value):
            builder.arguments.append(value)
            return "?"
        case .attribute(let i):
            return "\(alias).\(column(entity, i))"
        case .primaryKey:
            return "\(alias).\"Z_PK\""
        case .toOne(let reference, let inner):
            guard let r = schema.relationship(reference), case .foreignKey(let slot) = r.storage else { return "NULL" }
            let other = builder.alias()
            let value = expression(inner, r.destination, other, &builder)
            return "(SELECT \(value) FROM \(Self.quote(r.destination.name)) AS \(other) WHERE \(other).\"Z_PK\" = \(alias).\(column(entity, slot)))"
        case .anyRelated(let reference, let test):
            guard let r = schema.relationship(reference) else { return "0" }
            let other = builder.alias()
            let (from, link) = relatedSource(r, owner: alias, alias: other, &builder)
            let condition = expression(test, r.destination, other, &builder)
            return "EXISTS (SELECT 1 FROM \(from) WHERE \(link) AND (\(condition)))"
        case .allRelated(let reference, let test):
            guard let r = schema.relationship(reference) else { return "1" }
            let other = builder.alias()
            let (from, link) = relatedSource(r, owner: alias, alias: other, &builder)
            let condition = expression(test, r.destination, other, &builder)
            // A member fails the test unless it is true: false and NULL both fail, as in memory.
            return "NOT EXISTS (SELECT 1 FROM \(from) WHERE \(link) AND (CASE WHEN (\(condition)) THEN 0 ELSE 1 END))"
        case .relatedCount(let reference):
            guard let r = schema.relationship(reference) else { return "0" }
            let other = builder.alias()
            let (from, link) = relatedSource(r, owner: alias, alias: other, &builder)
            return "(SELECT COUNT(*) FROM \(from) WHERE \(link))"
        case .compare(let op, let l, let r):
            let a = sub(l), b = sub(r)
            let symbol = switch op {
            case .equal: "IS"
            case .notEqual: "IS NOT"
            case .less: "<"
            case .lessOrEqual: "<="
            case .greater: ">"
            case .greaterOrEqual: ">="
            }
            return "(\(a) \(symbol) \(b))"
        case .and(let l, let r):
            let a = sub(l), b = sub(r)
            return "(\(a) AND \(b))"
        case .or(let l, let r):
            let a = sub(l), b = sub(r)
            return "(\(a) OR \(b))"
        case .not(let n):
            return "(NOT \(sub(n)))"
        case .coalesce(let l, let r):
            let a = sub(l), b = sub(r)
            return "COALESCE(\(a), \(b))"
        case .nullPropagating(let test, let then):
            let t = sub(test), e = sub(then)
            return "(CASE WHEN \(t) IS NULL THEN NULL ELSE \(e) END)"
        case .conditional(let test, let a, let b):
            let t = sub(test), x = sub(a), y = sub(b)
            return "(CASE WHEN \(t) THEN \(x) ELSE \(y) END)"
        case .string(let op, let l, let r):
            let a = sub(l), b = sub(r)
            return "\(SQLFunctions.name(of: op))(\(a), \(b))"
        case .lowercase(let n):
            return "loom_lower(\(sub(n)))"
        case .length(let n):
            return "loom_length(\(sub(n)))"
        case .isIn(let n, let list):
            let a = sub(n)
            if list.isEmpty { return "(CASE WHEN \(a) IS NULL THEN NULL ELSE 0 END)" }
            for value in list { builder.arguments.append(value) }
            return "(\(a) IN (\(Array(repeating: "?", count: list.count).joined(separator: ", "))))"
        case .arithmetic(let op, let l, let r):
            let a = sub(l), b = sub(r)
            let symbol = switch op {
            case .add: "+"
            case .subtract: "-"
            case .multiply: "*"
            case .divide: "/"
            case .remainder: "%"
            }
            return "(\(a) \(symbol) \(b))"
        case .negate(let n):
            return "(- \(sub(n)))"
        }
    }
}

/// SQL functions that give SQLite the exact string semantics of Loom's in-memory evaluator
/// (``LoomStringFunctions``), registered on every connection.
///
/// Registered with SQLite's C API rather than GRDB's `DatabaseFunction`, which reads text
/// arguments as C strings: a string holding a NUL character must be compared whole.
enum SQLFunctions {
    static let operators: [PredicateNode.StringOperator] = [.contains, .hasPrefix, .hasSuffix, .containsIgnoringCaseAndDiacritics]

    static func name(of op: PredicateNode.StringOperator) -> String {
        switch op {
        case .contains: "loom_contains"
        case .hasPrefix: "loom_has_prefix"
        case .hasSuffix: "loom_has_suffix"
        case .containsIgnoringCaseAndDiacritics: "loom_contains_ci"
        }
    }

    static func register(in db: Database) {
        guard let connection = db.sqliteConnection else { return }
        register(on: connection)
    }

    /// Registers the functions on a connection of SQLite's C API.
    static func register(on connection: OpaquePointer) {
        let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC
        for (i, op) in operators.enumerated() {
            // The operator travels as the function's user data: its position, plus one.
            sqlite3_create_function_v2(connection, name(of: op), 2, flags, UnsafeMutableRawPointer(bitPattern: i + 1), { context, _, arguments in
                let op = SQLFunctions.operators[Int(bitPattern: sqlite3_user_data(context)) - 1]
                guard let arguments, case .text(let a) = SQLFunctions.value(arguments[0]), case .text(let b) = SQLFunctions.value(arguments[1]) else {
                    return sqlite3_result_null(context)
                }
                sqlite3_result_int64(context, LoomStringFunctions.evaluate(op, a, b) ? 1 : 0)
            }, nil, nil, nil)
        }
        sqlite3_create_function_v2(connection, "loom_lower", 1, flags, nil, { context, _, arguments in
            guard let arguments, case .text(let a) = SQLFunctions.value(arguments[0]) else { return sqlite3_result_null(context) }
            SQLFunctions.result(.text(LoomStringFunctions.lowercase(a)), context)
        }, nil, nil, nil)
        sqlite3_create_function_v2(connection, "loom_length", 1, flags, nil, { context, _, arguments in
            guard let arguments else { return sqlite3_result_null(context) }
            SQLFunctions.result(LoomStringFunctions.length(SQLFunctions.value(arguments[0])), context)
        }, nil, nil, nil)
    }

    /// A function argument as a stored value, text read with its length.
    static func value(_ value: OpaquePointer?) -> StoredValue {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let text = sqlite3_value_text(value) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value))), as: UTF8.self))
        case SQLITE_BLOB:
            guard let bytes = sqlite3_value_blob(value) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: Int(sqlite3_value_bytes(value))))
        default: return .null
        }
    }

    /// Sets a function's result.
    static func result(_ value: StoredValue, _ context: OpaquePointer?) {
        switch value {
        case .null: sqlite3_result_null(context)
        case .integer(let v): sqlite3_result_int64(context, v)
        case .real(let v): sqlite3_result_double(context, v)
        case .text(var v):
            v.withUTF8 { bytes in
                guard let base = bytes.baseAddress, bytes.count > 0 else { return sqlite3_result_text(context, "", 0, nil) }
                base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_result_text64(context, $0, sqlite3_uint64(bytes.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self), UInt8(SQLITE_UTF8))
                }
            }
        case .blob(let v):
            v.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress, bytes.count > 0 {
                    sqlite3_result_blob64(context, base, sqlite3_uint64(bytes.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
                } else {
                    sqlite3_result_zeroblob(context, 0)
                }
            }
        }
    }
}
