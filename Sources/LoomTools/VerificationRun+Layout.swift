import Foundation
@_spi(LoomStore) import LoomCore
import LoomSQL
import LoomSQLite
import GRDB

/// The layout checks: the tables, columns and unique indexes the saved schema needs, as
/// ``SQLGenerator`` creates them, and the saved version hash.
extension VerificationRun {
    mutating func checkLayout(_ db: Database) throws {
        if let saved = state.metadata["versionHash"], saved != state.record.versionHash {
            findings.append(VerificationFinding(
                kind: .schemaHashMismatch,
                message: "loom_metadata's versionHash is \(saved), but the saved schema's hash is \(state.record.versionHash): the schema or the hash was changed outside Loom."))
        }
        if try db.tableExists("loom_keys") {
            var marks: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT entity, next FROM loom_keys") {
                // A damaged file's NULL or text throws rather than traps (GRDB's subscripts trap).
                let entity: String = try row.decode(atIndex: 0), next: Int64 = try row.decode(atIndex: 1)
                marks[entity] = next
            }
            keyMarks = marks
        } else {
            findings.append(VerificationFinding(kind: .missingTable, property: "loom_keys", message: "The key allocator's table loom_keys is missing: Loom cannot give new objects keys."))
        }
        for entity in schema.entities {
            try checkTable(entity.name, entity: entity.name, expected: expectedColumns(entity), db)
            try checkUniqueIndexes(entity, db)
        }
        for table in schema.joinTables {
            let keys = [JoinTable.sourceColumn, JoinTable.targetColumn].map { (name: $0, type: "INTEGER", notNull: true) }
            try checkTable(table.name, entity: table.sourceEntityName, expected: keys, db)
        }
        for constraint in schema.hierarchyConstraints { try checkHierarchyConstraint(constraint, db) }
    }

    /// A constraint declared on a parent needs its table with a unique index, the triggers of
    /// every member table that fill it, and no value shared by two rows of its members.
    private mutating func checkHierarchyConstraint(_ constraint: HierarchyConstraint, _ db: Database) throws {
        let owner = constraint.owner.name, list = constraint.attributes.joined(separator: ", ")
        var missing: [String] = []
        if try db.tableExists(constraint.name) {
            let unique = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list(?) WHERE \"unique\" = 1", arguments: [constraint.name])
            if unique.isEmpty { missing.append("its table's unique index") }
        } else {
            missing.append("its table \(constraint.name)")
        }
        let triggers = Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        for member in constraint.members {
            let names = ["insert", "update", "delete"].map { "\(constraint.triggerName(for: member))_\($0)" }
            if !names.allSatisfy(triggers.contains) { missing.append("the triggers of \(member.name)") }
        }
        if !missing.isEmpty {
            findings.append(VerificationFinding(
                kind: .missingUniqueIndex, entity: owner, property: constraint.attributes.joined(separator: ","),
                message: "\(owner)'s uniqueness of \(list) across its sub-entities lacks \(missing.joined(separator: ", ")): the store no longer refuses duplicates between them."))
        }
        // The members' rows themselves, whatever the table holds.
        var byValues: [[DatabaseValue]: [(entity: String, key: Int64)]] = [:]
        for member in constraint.members {
            let names = constraint.attributes.map { name in member.storedValueIndex(named: name).map(member.columnName(at:)) ?? name }
            guard has(member.name, names) else { continue }
            let selected = names.map(Self.quote)
            let rows = try Row.fetchAll(db, sql: "SELECT \"Z_PK\", \(selected.joined(separator: ", ")) FROM \(SQLGenerator.quote(member.name)) WHERE \(selected.map { "\($0) IS NOT NULL" }.joined(separator: " AND "))")
            for row in rows {
                let key: Int64 = try row.decode(atIndex: 0)
                byValues[(1...constraint.attributes.count).map { row[$0] as DatabaseValue }, default: []].append((member.name, key))
            }
        }
        for objects in byValues.values where objects.count > 1 {
            let sorted = objects.sorted { ($0.entity, $0.key) < ($1.entity, $1.key) }
            findings.append(VerificationFinding(
                kind: .uniquenessViolation, entity: sorted[0].entity, property: constraint.attributes.joined(separator: ","),
                message: "\(sorted.map { "\($0.entity) \($0.key)" }.joined(separator: " and ")) have the same \(list), which must be unique across \(owner)'s sub-entities."))
        }
    }

    /// The columns ``SQLGenerator/createTable(_:named:)`` gives an entity's table.
    private func expectedColumns(_ entity: EntityDescription) -> [(name: String, type: String, notNull: Bool)] {
        let dialect = SQLiteDialect()
        var columns: [(name: String, type: String, notNull: Bool)] = [("Z_PK", dialect.integerType, false), ("Z_OPT", dialect.integerType, true)]
        for slot in 0..<entity.storedValueCount {
            let name = entity.columnName(at: slot)
            switch entity.storedValue(at: slot) {
            case .attribute(let a): columns.append((name, dialect.columnType(a.type), !a.isOptional))
            case .foreignKey: columns.append((name, dialect.integerType, false))
            case .order: columns.append((name, dialect.orderType, false))
            }
        }
        return columns
    }

    /// Compares a table's columns with those expected, and records the columns it has.
    private mutating func checkTable(_ table: String, entity: String, expected: [(name: String, type: String, notNull: Bool)], _ db: Database) throws {
        let rows = try Row.fetchAll(db, sql: "SELECT name, type, \"notnull\", dflt_value IS NOT NULL, pk FROM pragma_table_info(?)", arguments: [table])
        guard !rows.isEmpty else {
            findings.append(VerificationFinding(kind: .missingTable, entity: entity, property: table, message: "The table \(table) is missing: its objects cannot be read or saved."))
            return
        }
        let actual = rows.map { Column(name: $0[0], type: $0[1], notNull: $0[2], hasDefault: $0[3]) }
        let byName = Dictionary(actual.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        columns[table] = Set(byName.keys)
        for column in expected {
            guard let found = byName[column.name] else {
                findings.append(VerificationFinding(kind: .missingColumn, entity: entity, property: column.name, message: "The table \(table) has no column \(column.name)."))
                continue
            }
            if found.type.uppercased() != column.type {
                findings.append(VerificationFinding(kind: .columnTypeMismatch, entity: entity, property: column.name,
                                                    message: "\(table).\(column.name) is \(found.type.isEmpty ? "untyped" : found.type), not \(column.type)."))
            }
            // The key column is NOT NULL by being the rowid, whatever its declaration says.
            if found.notNull != column.notNull && column.name != "Z_PK" {
                findings.append(VerificationFinding(
                    kind: .columnNullabilityMismatch, entity: entity, property: column.name,
                    message: "\(table).\(column.name) is \(found.notNull ? "NOT NULL" : "nullable"), but the saved schema makes it \(column.notNull ? "required" : "optional")."))
            }
        }
        let known = Set(expected.map(\.name))
        for column in actual where !known.contains(column.name) && column.notNull && !column.hasDefault {
            findings.append(VerificationFinding(kind: .extraRequiredColumn, entity: entity, property: column.name,
                                                message: "\(table).\(column.name) is not in the saved schema and is NOT NULL without a default: every insert fails."))
        }
    }

    /// Each uniqueness constraint needs a unique index on exactly its columns.
    private mutating func checkUniqueIndexes(_ entity: EntityDescription, _ db: Database) throws {
        guard columns[entity.name] != nil else { return }
        var uniqueIndexes: [Set<String>] = []
        for index in try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list(?) WHERE \"unique\" = 1", arguments: [entity.name]) {
            uniqueIndexes.append(Set(try String.fetchAll(db, sql: "SELECT name FROM pragma_index_info(?)", arguments: [index])))
        }
        for constraint in entity.uniquenessConstraints {
            let wanted = Set(constraint.map { name in entity.storedValueIndex(named: name).map(entity.columnName(at:)) ?? name })
            if !uniqueIndexes.contains(wanted) {
                findings.append(VerificationFinding(
                    kind: .missingUniqueIndex, entity: entity.name, property: constraint.joined(separator: ","),
                    message: "\(entity.name) has no unique index on \(constraint.joined(separator: ", ")): the store no longer refuses duplicates."))
            }
        }
    }
}
