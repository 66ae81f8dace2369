import LoomCore
import GRDB

/// Writes the SQL a store runs, from entities and ``PredicateNode``s. Identifiers are quoted;
/// values are never spliced into SQL text, only bound as parameters.
struct SQLGenerator: Sendable {
    let schema: Schema

    static func quote(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    func columns(_ entity: EntityDescription, alias: String? = nil) -> String {
        let prefix = alias.map { "\($0)." } ?? ""
        return (["Z_PK", "Z_OPT"] + (0..<entity.storedValueCount).map(entity.columnName(at:)))
            .map { prefix + Self.quote($0) }.joined(separator: ", ")
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

    func insert(_ entity: EntityDescription) -> String {
        let names = ["\"Z_PK\""] + (0..<entity.storedValueCount).map { column(entity, $0) } + ["\"Z_OPT\""]
        let values = Array(repeating: "?", count: entity.storedValueCount + 1) + ["1"]
        return "INSERT INTO \(Self.quote(entity.name)) (\(names.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))"
    }

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

    func delete(_ entity: EntityDescription) -> String {
        "DELETE FROM \(Self.quote(entity.name)) WHERE \"Z_PK\" = ? AND \"Z_OPT\" = ?"
    }

    // MARK: Queries

    /// The text and arguments of one statement being built; makes table aliases.
    struct Builder {
        var arguments: [DatabaseValue] = []
        private var aliases = 0

        mutating func alias() -> String {
            aliases += 1
            return "t\(aliases)"
        }
    }

    func select(_ query: StoreQuery) -> (String, StatementArguments) {
        var builder = Builder()
        var text = "SELECT \(columns(query.entity, alias: "t0")) FROM \(Self.quote(query.entity.name)) AS t0"
        if let predicate = query.predicate {
            text += " WHERE " + expression(predicate, query.entity, "t0", &builder)
        }
        var order: [String] = []
        for key in query.sortKeys {
            order.append("\(expression(key.valueNode, query.entity, "t0", &builder)) \(key.ascending ? "ASC" : "DESC")")
        }
        text += " ORDER BY " + (order + ["t0.\"Z_PK\""]).joined(separator: ", ")
        if query.fetchLimit != nil || query.fetchOffset > 0 {
            text += " LIMIT ? OFFSET ?"
            builder.arguments.append((query.fetchLimit.map(Int64.init) ?? -1).databaseValue)
            builder.arguments.append(Int64(query.fetchOffset).databaseValue)
        }
        return (text, StatementArguments(builder.arguments))
    }

    func count(_ query: StoreQuery) -> (String, StatementArguments) {
        var builder = Builder()
        var inner = "SELECT 1 FROM \(Self.quote(query.entity.name)) AS t0"
        if let predicate = query.predicate {
            inner += " WHERE " + expression(predicate, query.entity, "t0", &builder)
        }
        if query.fetchLimit == nil && query.fetchOffset == 0 {
            return ("SELECT COUNT(*) FROM (\(inner))", StatementArguments(builder.arguments))
        }
        inner += " LIMIT ? OFFSET ?"
        builder.arguments.append((query.fetchLimit.map(Int64.init) ?? -1).databaseValue)
        builder.arguments.append(Int64(query.fetchOffset).databaseValue)
        return ("SELECT COUNT(*) FROM (\(inner))", StatementArguments(builder.arguments))
    }

    /// Rows by primary key. The keys are one parameter, a JSON array, so that any number of
    /// keys is one statement (and one cached statement).
    func selectByKeys(_ entity: EntityDescription) -> String {
        "SELECT \(columns(entity)) FROM \(Self.quote(entity.name)) WHERE \"Z_PK\" IN (SELECT value FROM json_each(?))"
    }

    /// The rows a to-many relationship leads to for a JSON array of owner keys, each with its
    /// owner's key first.
    func selectRelated(_ relationship: ResolvedRelationship) -> String {
        let destination = Self.quote(relationship.destination.name)
        switch relationship.storage {
        case .inverseForeignKey(let slot):
            let fk = column(relationship.destination, slot)
            return "SELECT d.\(fk), \(columns(relationship.destination, alias: "d")) FROM \(destination) AS d WHERE d.\(fk) IN (SELECT value FROM json_each(?)) ORDER BY d.\(fk), d.\"Z_PK\""
        case .joinTable(let table, let own, let other):
            return "SELECT j.\(Self.quote(own)), \(columns(relationship.destination, alias: "d")) FROM \(Self.quote(table.name)) AS j JOIN \(destination) AS d ON d.\"Z_PK\" = j.\(Self.quote(other)) WHERE j.\(Self.quote(own)) IN (SELECT value FROM json_each(?)) ORDER BY j.\(Self.quote(own)), d.\"Z_PK\""
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
            builder.arguments.append(value.databaseValue)
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
            for value in list { builder.arguments.append(value.databaseValue) }
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
enum SQLFunctions {
    static func name(of op: PredicateNode.StringOperator) -> String {
        switch op {
        case .contains: "loom_contains"
        case .hasPrefix: "loom_has_prefix"
        case .hasSuffix: "loom_has_suffix"
        case .containsIgnoringCaseAndDiacritics: "loom_contains_ci"
        }
    }

    static let all: [DatabaseFunction] = {
        var functions: [DatabaseFunction] = []
        for op in [PredicateNode.StringOperator.contains, .hasPrefix, .hasSuffix, .containsIgnoringCaseAndDiacritics] {
            functions.append(DatabaseFunction(name(of: op), argumentCount: 2, pure: true) { values in
                guard case .string(let a) = values[0].storage, case .string(let b) = values[1].storage else { return nil }
                return LoomStringFunctions.evaluate(op, a, b) ? 1 : 0
            })
        }
        functions.append(DatabaseFunction("loom_lower", argumentCount: 1, pure: true) { values in
            guard case .string(let a) = values[0].storage else { return nil }
            return LoomStringFunctions.lowercase(a)
        })
        functions.append(DatabaseFunction("loom_length", argumentCount: 1, pure: true) { values in
            switch LoomStringFunctions.length(StoredValue(values[0].storage)) {
            case .integer(let n): return n
            default: return nil
            }
        })
        return functions
    }()

    static func register(in db: Database) {
        for function in all { db.add(function: function) }
    }
}
