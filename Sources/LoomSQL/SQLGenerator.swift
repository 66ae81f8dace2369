import Foundation
@_spi(LoomStore) package import LoomCore

/// Writes the SQL a store runs, from entities and `PredicateNode`s, in a ``SQLDialect``: the
/// table layout (a table per entity with `Z_PK`, `Z_OPT` and a column per stored value, join
/// tables, unique and foreign-key indexes), saves, lookups, queries and aggregates.
/// Identifiers are quoted; values are never spliced into SQL text, only bound as parameters.
package struct SQLGenerator: Sendable {
    package let schema: Schema
    package let dialect: any SQLDialect
    /// The statements of each entity that do not depend on a query, built once: a save or a
    /// lookup reuses the same text (and so the same cached prepared statement) for every row.
    private(set) var texts: [ObjectIdentifier: EntityTexts]
    /// The related-rows texts of relationships narrowed to one entity of their destination's
    /// hierarchy (``ResolvedRelationship/narrowed(to:)``): for many owners, and for one.
    private(set) var narrowedRelated: [ResolvedRelationship.Identity: (many: String, one: String)] = [:]
    /// The texts of queries by shape (see ``QueryTexts``), shared by the generator's copies.
    let queryTexts = QueryTexts()
    /// For each member table of a hierarchy constraint, the constraints' tables: a change of it
    /// changes them too, through its triggers (see `SQLGenerator+HierarchyConstraints.swift`).
    /// Built once: a PostgreSQL save reads it.
    package let hierarchyConstraintTables: [String: [String]]

    /// One entity's fixed statements. A class: a lookup by key reads one text of it, and
    /// copying a struct of eight texts out of the dictionary retained and released all of them
    /// on every lookup.
    package final class EntityTexts: Sendable {
        /// `"Z_PK", "Z_OPT", <columns>` unqualified, and qualified by the alias `t0`.
        let columns: String
        let aliasedColumns: String
        let insert: String
        let delete: String
        /// Rows by a JSON array of keys, and one row by key.
        let selectByKeys: String
        let selectByKey: String
        /// For each to-many relationship, by index: its destinations for a JSON array of owners.
        let selectRelated: [Int: String]
        /// The same for one owner, bound as an integer: a to-many fault firing. `IN (SELECT
        /// value FROM json_each(?))` makes SQLite build an ephemeral table for every query,
        /// which was a large part of such a query's cost.
        let selectRelatedToOwner: [Int: String]

        init(columns: String, aliasedColumns: String, insert: String, delete: String, selectByKeys: String, selectByKey: String,
             selectRelated: [Int: String] = [:], selectRelatedToOwner: [Int: String] = [:]) {
            self.columns = columns
            self.aliasedColumns = aliasedColumns
            self.insert = insert
            self.delete = delete
            self.selectByKeys = selectByKeys
            self.selectByKey = selectByKey
            self.selectRelated = selectRelated
            self.selectRelatedToOwner = selectRelatedToOwner
        }

        /// The same texts with the to-many relationships' texts.
        func withRelated(_ many: [Int: String], toOwner one: [Int: String]) -> EntityTexts {
            EntityTexts(columns: columns, aliasedColumns: aliasedColumns, insert: insert, delete: delete, selectByKeys: selectByKeys,
                        selectByKey: selectByKey, selectRelated: many, selectRelatedToOwner: one)
        }
    }

    package init(schema: Schema, dialect: any SQLDialect) {
        self.schema = schema
        self.dialect = dialect
        self.hierarchyConstraintTables = Self.hierarchyConstraintTables(of: schema)
        var texts: [ObjectIdentifier: EntityTexts] = [:]
        for entity in schema.entities {
            texts[ObjectIdentifier(entity)] = Self.makeTexts(entity, dialect)
        }
        self.texts = texts
        for entity in schema.entities {
            var (many, one): ([Int: String], [Int: String]) = ([:], [:])
            for j in entity.relationships.indices {
                let r = schema.relationship(j, of: entity)
                if case .foreignKey = r.storage { continue }
                (many[j], one[j]) = (makeSelectRelated(r, oneOwner: false), makeSelectRelated(r, oneOwner: true))
                guard r.leadsToSubentities else { continue }
                for narrowed in r.concreteDestinations(in: schema) {
                    narrowedRelated[narrowed.identity] = (makeSelectRelated(narrowed, oneOwner: false), makeSelectRelated(narrowed, oneOwner: true))
                }
            }
            if many.isEmpty { continue }
            self.texts[ObjectIdentifier(entity)] = self.texts[ObjectIdentifier(entity)]?.withRelated(many, toOwner: one)
        }
    }

    private static func makeTexts(_ entity: EntityDescription, _ dialect: any SQLDialect) -> EntityTexts {
        let table = quote(entity.name)
        let names = ["Z_PK", "Z_OPT"] + (0..<entity.storedValueCount).map(entity.columnName(at:))
        let columns = names.map(quote).joined(separator: ", ")
        let inserted = (["Z_PK"] + (0..<entity.storedValueCount).map(entity.columnName(at:)) + ["Z_OPT"]).map(quote)
        let values = (1...(entity.storedValueCount + 1)).map(dialect.placeholder) + ["1"]
        return EntityTexts(
            columns: columns,
            aliasedColumns: names.map { "t0." + quote($0) }.joined(separator: ", "),
            insert: "INSERT INTO \(table) (\(inserted.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))",
            delete: "DELETE FROM \(table) WHERE \"Z_PK\" = \(dialect.placeholder(1)) AND \"Z_OPT\" = \(dialect.placeholder(2))",
            selectByKeys: "SELECT \(columns) FROM \(table) WHERE \(dialect.isInKeyList("\"Z_PK\"", dialect.placeholder(1)))",
            selectByKey: "SELECT \(columns) FROM \(table) WHERE \"Z_PK\" = \(dialect.placeholder(1))")
    }

    /// The fixed statements of `entity` (built now for an entity outside the schema).
    func texts(_ entity: EntityDescription) -> EntityTexts {
        texts[ObjectIdentifier(entity)] ?? Self.makeTexts(entity, dialect)
    }

    package static func quote(_ identifier: String) -> String {
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
    package func column(_ entity: EntityDescription, _ slot: Int) -> String {
        Self.quote(entity.columnName(at: slot))
    }

    // MARK: DDL

    package func createStatements() -> [String] {
        var statements: [String] = []
        for entity in schema.entities {
            statements.append(createTable(entity))
            statements += uniqueIndexStatements(entity)
        }
        for table in schema.joinTables { statements += createJoinTable(table) }
        return statements + indexStatements() + hierarchyConstraintStatements()
    }

    /// The `CREATE TABLE` of an entity, under its own name or `name` (a table being rebuilt).
    package func createTable(_ entity: EntityDescription, named name: String? = nil) -> String {
        let definitions = ["\"Z_PK\" \(dialect.primaryKeyDefinition)", "\"Z_OPT\" \(dialect.integerType) NOT NULL"]
            + (0..<entity.storedValueCount).map { columnDefinition(entity, $0) }
        return "CREATE TABLE \(Self.quote(name ?? entity.name)) (\(definitions.joined(separator: ", ")))"
    }

    /// A slot's column: its quoted name, type and, for a required attribute, `NOT NULL`.
    package func columnDefinition(_ entity: EntityDescription, _ slot: Int) -> String {
        switch entity.storedValue(at: slot) {
        case .attribute(let attribute):
            "\(column(entity, slot)) \(dialect.columnType(attribute.type))\(attribute.isOptional ? "" : " NOT NULL")"
        case .foreignKey:
            // Nullable even when required: Loom checks required relationships at save.
            "\(column(entity, slot)) \(dialect.integerType)"
        case .order:
            "\(column(entity, slot)) \(dialect.orderType)"
        }
    }

    /// The unique indexes of an entity's uniqueness constraints.
    package func uniqueIndexStatements(_ entity: EntityDescription) -> [String] {
        entity.uniquenessConstraints.map { constraint in
            let name = Self.quote("loom_unique_\(entity.name)_\(constraint.joined(separator: "_"))")
            return "CREATE UNIQUE INDEX \(name) ON \(Self.quote(entity.name)) (\(constraintColumns(entity, constraint)))"
        }
    }

    /// A join table and the index on its target column.
    package func createJoinTable(_ table: JoinTable) -> [String] {
        let source = Self.quote(JoinTable.sourceColumn), target = Self.quote(JoinTable.targetColumn)
        let options = dialect.joinTableOptions.isEmpty ? "" : " " + dialect.joinTableOptions
        return [
            "CREATE TABLE \(Self.quote(table.name)) (\(source) \(dialect.integerType) NOT NULL, \(target) \(dialect.integerType) NOT NULL, PRIMARY KEY (\(source), \(target)))\(options)",
            "CREATE INDEX \(Self.quote("loom_join_\(table.name)_target")) ON \(Self.quote(table.name)) (\(target), \(source))",
        ]
    }

    /// Columns of a constraint or index, whose names are attributes or to-one relationships.
    package func constraintColumns(_ entity: EntityDescription, _ names: [String]) -> String {
        names.map { name in entity.storedValueIndex(named: name).map { column(entity, $0) } ?? Self.quote(name) }.joined(separator: ", ")
    }

    package func indexStatements() -> [String] {
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

    package func insert(_ entity: EntityDescription) -> String { texts(entity).insert }

    /// An update of `indexes`' columns, bumping the version: the new values are bound first,
    /// then the key and the version expected.
    package func update(_ entity: EntityDescription, columns indexes: [Int]) -> String {
        let sets = indexes.enumerated().map { "\(column(entity, $1)) = \(dialect.placeholder($0 + 1))" } + ["\"Z_OPT\" = \"Z_OPT\" + 1"]
        let next = indexes.count + 1
        return "UPDATE \(Self.quote(entity.name)) SET \(sets.joined(separator: ", ")) WHERE \"Z_PK\" = \(dialect.placeholder(next)) AND \"Z_OPT\" = \(dialect.placeholder(next + 1))"
    }

    package func insertLink(_ table: JoinTable) -> String {
        dialect.insertIgnoringExisting(into: Self.quote(table.name), columns: ["\"Z_SOURCE\"", "\"Z_TARGET\""], values: [dialect.placeholder(1), dialect.placeholder(2)])
    }

    package func deleteLink(_ table: JoinTable) -> String {
        "DELETE FROM \(Self.quote(table.name)) WHERE \"Z_SOURCE\" = \(dialect.placeholder(1)) AND \"Z_TARGET\" = \(dialect.placeholder(2))"
    }

    package func deleteLinks(_ table: JoinTable, column: String) -> String {
        "DELETE FROM \(Self.quote(table.name)) WHERE \(Self.quote(column)) = \(dialect.placeholder(1))"
    }

    package func delete(_ entity: EntityDescription) -> String { texts(entity).delete }

    /// Keys one delete by keys binds (``deleteKeys(_:)``): a change set's run of deletes of one
    /// entity is cut into groups of this many, the last one padded with its own last key, so
    /// that every group runs the same prepared text.
    package static let keysPerDelete = 256

    /// A delete of ``keysPerDelete`` rows of `entity` by key alone (no version check).
    package func deleteKeys(_ entity: EntityDescription) -> String {
        "DELETE FROM \(Self.quote(entity.name)) WHERE \"Z_PK\" IN (\(keyList()))"
    }

    /// A delete of the join-table rows of ``keysPerDelete`` objects whose key is in `column`.
    package func deleteLinksByKeys(_ table: JoinTable, column: String) -> String {
        "DELETE FROM \(Self.quote(table.name)) WHERE \(Self.quote(column)) IN (\(keyList()))"
    }

    private func keyList() -> String {
        (1...Self.keysPerDelete).map { dialect.placeholder($0) }.joined(separator: ", ")
    }

    // MARK: Queries

    /// The text and arguments of one statement being built; makes table aliases.
    struct Builder {
        let dialect: any SQLDialect
        var arguments: [StoredValue] = []
        private var aliases = 0

        init(_ dialect: any SQLDialect) { self.dialect = dialect }

        mutating func alias() -> String {
            aliases += 1
            return "t\(aliases)"
        }

        /// Binds `value` as the next parameter and returns its marker.
        mutating func bind(_ value: StoredValue) -> String {
            arguments.append(value)
            return dialect.placeholder(arguments.count)
        }

        /// Appends ` LIMIT … OFFSET …` and its two values when the query has a window.
        mutating func appendWindow(to text: inout String, limit: Int?, offset: Int) {
            guard let window = Self.window(limit: limit, offset: offset, dialect) else { return }
            let limit = bind(window[0])
            text += " LIMIT \(limit) OFFSET \(bind(window[1]))"
        }

        /// The values of ` LIMIT … OFFSET …`, or `nil` when the query has no window.
        static func window(limit: Int?, offset: Int, _ dialect: any SQLDialect) -> [StoredValue]? {
            guard limit != nil || offset > 0 else { return nil }
            return [limit.map { .integer(Int64($0)) } ?? dialect.unlimited, .integer(Int64(offset))]
        }
    }

    /// A query's statement returning every column of each match: the same text for queries
    /// that differ only in their constants (see ``QueryTexts``).
    package func select(_ query: StoreQuery) -> (String, [StoredValue]) {
        cachedSelect(query)
    }

    /// A query's statement returning `resultColumns` (of the row aliased `t0`) for each match.
    func select(_ query: StoreQuery, resultColumns: String) -> (String, [StoredValue]) {
        var builder = Builder(dialect)
        var text = "SELECT \(resultColumns) FROM \(Self.quote(query.entity.name)) AS t0"
        if let predicate = query.predicate {
            text += " WHERE " + condition(predicate, query.entity, "t0", &builder)
        }
        var order: [String] = []
        for key in query.sortKeys {
            order.append(dialect.orderTerm(expression(key.valueNode, query.entity, "t0", &builder), ascending: key.ascending))
        }
        text += " ORDER BY " + (order + ["t0.\"Z_PK\""]).joined(separator: ", ")
        builder.appendWindow(to: &text, limit: query.fetchLimit, offset: query.fetchOffset)
        return (text, builder.arguments)
    }

    package func count(_ query: StoreQuery) -> (String, [StoredValue]) {
        var builder = Builder(dialect)
        var inner = "SELECT 1 FROM \(Self.quote(query.entity.name)) AS t0"
        if let predicate = query.predicate {
            inner += " WHERE " + condition(predicate, query.entity, "t0", &builder)
        }
        builder.appendWindow(to: &inner, limit: query.fetchLimit, offset: query.fetchOffset)
        return ("SELECT COUNT(*) FROM (\(inner)) AS matches", builder.arguments)
    }

    /// Rows by primary key. The keys are one parameter, a JSON array, so that any number of
    /// keys is one statement (and one cached statement).
    package func selectByKeys(_ entity: EntityDescription) -> String { texts(entity).selectByKeys }

    /// One row by primary key: the common case of a lookup, without JSON.
    package func selectByKey(_ entity: EntityDescription) -> String { texts(entity).selectByKey }

    /// The rows a to-many relationship leads to for a JSON array of owner keys, each with its
    /// owner's key first.
    /// A relationship narrowed to one of its destination's sub-entities
    /// (``ResolvedRelationship/narrowed(to:)``) reads that entity's table.
    package func selectRelated(_ relationship: ResolvedRelationship) -> String {
        if relationship.isNarrowed { return narrowedRelated[relationship.identity]?.many ?? makeSelectRelated(relationship, oneOwner: false) }
        return texts(relationship.source).selectRelated[relationship.index] ?? makeSelectRelated(relationship, oneOwner: false)
    }

    /// ``selectRelated(_:)`` for one owner, whose key is bound as an integer.
    package func selectRelatedToOwner(_ relationship: ResolvedRelationship) -> String {
        if relationship.isNarrowed { return narrowedRelated[relationship.identity]?.one ?? makeSelectRelated(relationship, oneOwner: true) }
        return texts(relationship.source).selectRelatedToOwner[relationship.index] ?? makeSelectRelated(relationship, oneOwner: true)
    }


    private func makeSelectRelated(_ relationship: ResolvedRelationship, oneOwner: Bool) -> String {
        let destination = Self.quote(relationship.destination.name)
        let owners = { (column: String) in oneOwner ? "\(column) = \(dialect.placeholder(1))" : dialect.isInKeyList(column, dialect.placeholder(1)) }
        switch relationship.storage {
        case .inverseForeignKey(let slot):
            let fk = column(relationship.destination, slot)
            let order = oneOwner ? "d.\"Z_PK\"" : "d.\(fk), d.\"Z_PK\""
            return "SELECT d.\(fk), \(columns(relationship.destination, alias: "d")) FROM \(destination) AS d WHERE \(owners("d.\(fk)")) ORDER BY \(order)"
        case .joinTable(let table, let own, let other):
            let order = oneOwner ? "d.\"Z_PK\"" : "j.\(Self.quote(own)), d.\"Z_PK\""
            return "SELECT j.\(Self.quote(own)), \(columns(relationship.destination, alias: "d")) FROM \(Self.quote(table.name)) AS j JOIN \(destination) AS d ON d.\"Z_PK\" = j.\(Self.quote(other)) WHERE \(owners("j.\(Self.quote(own))")) ORDER BY \(order)"
        case .foreignKey:
            return "SELECT NULL WHERE \(dialect.never)"
        }
    }

    /// The `FROM … WHERE …` that finds the objects of to-many `r` of the row aliased `owner`,
    /// aliased `alias`: through the destinations' foreign key, or through the join table.
    func relatedSource(_ r: ResolvedRelationship, owner: String, alias: String, _ builder: inout Builder) -> (from: String, link: String) {
        let destination = destinationTable(r)
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

    /// The relationship a reference names, as `entity` has it: a sub-entity of the
    /// reference's entity has the relationships it inherits in the same positions, with
    /// foreign keys at slots of its own.
    func relationship(_ reference: RelationshipReference, of entity: EntityDescription) -> ResolvedRelationship? {
        guard let r = schema.relationship(reference) else { return nil }
        if r.source === entity || !entity.isKind(of: r.source) { return r }
        return schema.relationship(r.index, of: entity)
    }

    /// The table a relationship's destinations are read from: the destination's, or, when
    /// it has sub-entities, every one of their tables as one (`UNION ALL` of the destination's
    /// columns: a sub-entity's table has them under the same names).
    package func destinationTable(_ r: ResolvedRelationship) -> String {
        guard r.leadsToSubentities else { return Self.quote(r.destination.name) }
        let names = ["Z_PK", "Z_OPT"] + (0..<r.destination.storedValueCount).map(r.destination.columnName(at:))
        let list = names.map(Self.quote).joined(separator: ", ")
        let parts = schema.concreteEntities(of: r.destination).map { "SELECT \(list) FROM \(Self.quote($0.name))" }
        guard !parts.isEmpty else { return "(SELECT \(list) FROM \(Self.quote(r.destination.name)) WHERE \(dialect.never))" }
        return "(" + parts.joined(separator: " UNION ALL ") + ")"
    }

    /// SQL for a predicate node evaluated on the row aliased `alias` of `entity`, as a value
    /// (compared, sorted, returned); constants become parameters with their value appended to
    /// the builder's arguments, in text order.
    func expression(_ node: PredicateNode, _ entity: EntityDescription, _ alias: String, _ builder: inout Builder) -> String {
        let (sql, isCondition) = typedExpression(node, entity, alias, &builder)
        return isCondition ? dialect.value(ofCondition: sql) : sql
    }

    /// ``expression(_:_:_:_:)`` as a truth value (`WHERE`, `CASE WHEN`).
    func condition(_ node: PredicateNode, _ entity: EntityDescription, _ alias: String, _ builder: inout Builder) -> String {
        let (sql, isCondition) = typedExpression(node, entity, alias, &builder)
        return isCondition ? sql : dialect.condition(sql)
    }

    /// The SQL of a node, and whether it is a truth value (a comparison, a test, `AND`…) rather
    /// than a value: SQLite does not tell them apart, PostgreSQL does (``SQLDialect/condition(_:)``).
    private func typedExpression(_ node: PredicateNode, _ entity: EntityDescription, _ alias: String, _ builder: inout Builder) -> (String, Bool) {
        func value(_ n: PredicateNode) -> String { expression(n, entity, alias, &builder) }
        func test(_ n: PredicateNode) -> String { condition(n, entity, alias, &builder) }
        switch node {
        case .constant(let value):
            return (builder.bind(value), false)
        case .attribute(let i):
            return ("\(alias).\(column(entity, i))", false)
        case .primaryKey:
            return ("\(alias).\"Z_PK\"", false)
        case .toOne(let reference, let inner):
            guard let r = relationship(reference, of: entity), case .foreignKey(let slot) = r.storage else { return ("NULL", false) }
            let other = builder.alias()
            let (value, isCondition) = typedExpression(inner, r.destination, other, &builder)
            return ("(SELECT \(value) FROM \(destinationTable(r)) AS \(other) WHERE \(other).\"Z_PK\" = \(alias).\(column(entity, slot)))", isCondition)
        case .anyRelated(let reference, let inner):
            guard let r = relationship(reference, of: entity) else { return ("0", false) }
            let other = builder.alias()
            let (from, link) = relatedSource(r, owner: alias, alias: other, &builder)
            let condition = condition(inner, r.destination, other, &builder)
            return ("EXISTS (SELECT 1 FROM \(from) WHERE \(link) AND (\(condition)))", true)
        case .allRelated(let reference, let inner):
            guard let r = relationship(reference, of: entity) else { return ("1", false) }
            let other = builder.alias()
            let (from, link) = relatedSource(r, owner: alias, alias: other, &builder)
            let condition = condition(inner, r.destination, other, &builder)
            // A member fails the test unless it is true: false and NULL both fail, as in memory.
            return ("NOT EXISTS (SELECT 1 FROM \(from) WHERE \(link) AND (CASE WHEN (\(condition)) THEN \(dialect.never) ELSE \(dialect.condition("1")) END))", true)
        case .relatedCount(let reference):
            guard let r = relationship(reference, of: entity) else { return ("0", false) }
            let other = builder.alias()
            let (from, link) = relatedSource(r, owner: alias, alias: other, &builder)
            return ("(SELECT COUNT(*) FROM \(from) WHERE \(link))", false)
        case .compare(let op, let l, let r):
            let a = value(l), b = value(r)
            if op == .equal || op == .notEqual {
                let equal = op == .equal
                // A column against a constant that is not NULL: in a form an index can serve.
                if l.isColumn, case .constant(let constant) = r, !constant.isNull { return ("(\(dialect.comparison(a, equal: equal, toNonNull: b)))", true) }
                if r.isColumn, case .constant(let constant) = l, !constant.isNull { return ("(\(dialect.comparison(b, equal: equal, toNonNull: a)))", true) }
                return ("(\(dialect.nullSafeComparison(a, equal: equal, b)))", true)
            }
            let symbol = switch op {
            case .equal, .notEqual: ""
            case .less: "<"
            case .lessOrEqual: "<="
            case .greater: ">"
            case .greaterOrEqual: ">="
            }
            return ("(\(a) \(symbol) \(b))", true)
        case .and, .or:
            // A chain of one operator, as one list: `a OR b OR c`, not `((a OR b) OR c)`. A
            // chain of a thousand conditions (what `loom query` accepts) would otherwise recurse
            // a thousand levels deep, which overflowed the stack under ThreadSanitizer.
            let isAnd = if case .and = node { true } else { false }
            var operands: [PredicateNode] = []
            var pending = [node]
            while let next = pending.popLast() {
                switch next {
                case .and(let l, let r) where isAnd: pending += [r, l]
                case .or(let l, let r) where !isAnd: pending += [r, l]
                default: operands.append(next)
                }
            }
            return ("(" + operands.map(test).joined(separator: isAnd ? " AND " : " OR ") + ")", true)
        case .not(let n):
            return ("(NOT \(test(n)))", true)
        case .coalesce(let l, let r):
            let a = value(l), b = value(r)
            return ("COALESCE(\(a), \(b))", false)
        case .nullPropagating(let test, let then):
            let t = value(test)
            let (e, isCondition) = typedExpression(then, entity, alias, &builder)
            return ("(CASE WHEN \(t) IS NULL THEN NULL ELSE \(e) END)", isCondition)
        case .conditional(let t, let a, let b):
            let c = test(t), x = value(a), y = value(b)
            return ("(CASE WHEN \(c) THEN \(x) ELSE \(y) END)", false)
        case .string(let op, let l, let r):
            let a = value(l), b = value(r)
            return (dialect.stringTest(op, a, b), true)
        case .lowercase(let n):
            return (dialect.lowercase(value(n)), false)
        case .length(let n):
            return (dialect.length(value(n)), false)
        case .isIn(let n, let list):
            let a = value(n)
            if list.isEmpty { return ("(CASE WHEN \(a) IS NULL THEN NULL ELSE 0 END)", false) }
            let markers = list.map { builder.bind($0) }
            return ("(\(a) IN (\(markers.joined(separator: ", "))))", true)
        case .arithmetic(let op, let l, let r):
            let a = value(l), b = value(r)
            return (dialect.arithmetic(op, a, b), false)
        case .negate(let n):
            return ("(- \(value(n)))", false)
        }
    }
}

extension PredicateNode {
    /// Whether the node is one of the entity's own columns (an attribute or the key), which an
    /// index may cover.
    fileprivate var isColumn: Bool {
        switch self {
        case .attribute, .primaryKey: true
        default: false
        }
    }
}
