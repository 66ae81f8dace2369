@_spi(LoomStore) package import LoomCore

/// An inferred ``SchemaMigration`` as statements in the generator's dialect: what every SQL
/// store runs, in this order, inside the transaction that opens it.
///
/// Renamed columns and new optional ones change in place (`ALTER TABLE … RENAME COLUMN`,
/// `ADD COLUMN`, which do not touch the rows); every other change to a table rebuilds it: a new
/// table made from the model, filled with one `INSERT … SELECT` from the saved one, which then
/// goes, and the new one takes its name and indexes. Both SQLite's and PostgreSQL's DDL are
/// transactional: a failure leaves the store as it was.
///
/// The store adds what is its own: the saved schema record, the history's end, progress.
package enum MigrationStatement: Sendable {
    /// A statement with its values, bound in order.
    case execute(String, [StoredValue])
    /// A rebuilt table's rows copied into the new one: `sql` is `INSERT INTO building … SELECT
    /// … FROM table` with `arguments`; a store may append `WHERE "Z_PK" > ? ORDER BY "Z_PK" LIMIT
    /// ?` to copy in chunks. A required column left NULL fails it: see ``missingValueQueries``.
    case copyRows(entity: EntityDescription, sources: [SchemaMigration.ColumnSource], table: String, building: String,
                  sql: String, arguments: [StoredValue])
    /// A rebuilt table's unique index, or a hierarchy constraint's: saved rows that break it
    /// fail it, and `duplicates` finds one value they share and how many rows have it.
    case uniqueIndex(entity: EntityDescription, constraint: [String], sql: String, duplicates: String)
}

extension SQLGenerator {
    /// The statements of `migration`, from the saved tables to this generator's schema.
    package func migrationStatements(_ migration: SchemaMigration) -> [MigrationStatement] {
        // A hierarchy constraint's triggers name their table's columns: they go first, and are made anew last.
        var statements: [MigrationStatement] = migration.saved.map(droppingHierarchyConstraints(of:)) ?? []
        func execute(_ text: String, _ arguments: [StoredValue] = []) { statements.append(.execute(text, arguments)) }
        let (sourceColumn, targetColumn) = (Self.quote(JoinTable.sourceColumn), Self.quote(JoinTable.targetColumn))

        // One-to-many become many-to-many: read the saved keys before their tables change.
        for fill in migration.filledJoinTables {
            for statement in createJoinTable(fill.to) { execute(statement) }
            let (source, target) = (Self.quote(fill.sourceFrom), Self.quote(fill.targetFrom))
            execute("""
                INSERT INTO \(Self.quote(fill.to.name)) (\(sourceColumn), \(targetColumn)) \
                SELECT \(source), \(target) FROM \(Self.quote(fill.from)) WHERE \(source) IS NOT NULL AND \(target) IS NOT NULL
                """)
        }
        for change in migration.tables {
            switch change {
            case .create(let entity):
                execute(createTable(entity))
                for statement in uniqueIndexStatements(entity) { execute(statement) }
            case .drop(let name):
                execute("DROP TABLE \(Self.quote(name))")
                execute("DELETE FROM loom_keys WHERE entity = \(dialect.placeholder(1))", [.text(name)])
            case .alter(let entity, let renames, let slots):
                let table = Self.quote(entity.name)
                for rename in renames {
                    execute("ALTER TABLE \(table) RENAME COLUMN \(Self.quote(rename.from)) TO \(Self.quote(rename.to))")
                }
                for slot in slots { execute("ALTER TABLE \(table) ADD COLUMN \(columnDefinition(entity, slot))") }
            case .rebuild(let entity, let sources, let from):
                statements += rebuildStatements(entity, sources, from: from)
                if from != entity.name {
                    execute("UPDATE loom_keys SET entity = \(dialect.placeholder(1)) WHERE entity = \(dialect.placeholder(2))",
                            [.text(entity.name), .text(from)])
                }
            }
        }
        // A copied table may keep its name (a changed owning side): the saved one moves aside.
        for copy in migration.copiedJoinTables where copy.from == copy.to.name {
            let aside = "loom_migrating_\(copy.from)"
            execute("ALTER TABLE \(Self.quote(copy.from)) RENAME TO \(Self.quote(aside))")
            for statement in dialect.renamingTableIndexes(from: copy.from, to: aside) { execute(statement) }
            execute("DROP INDEX IF EXISTS \(Self.quote("loom_join_\(copy.from)_target"))")
        }
        for table in migration.createdJoinTables {
            for statement in createJoinTable(table) { execute(statement) }
        }
        for copy in migration.copiedJoinTables {
            let from = copy.from == copy.to.name ? "loom_migrating_\(copy.from)" : copy.from
            execute("""
                INSERT INTO \(Self.quote(copy.to.name)) (\(sourceColumn), \(targetColumn)) \
                SELECT \(Self.quote(copy.sourceFrom)), \(Self.quote(copy.targetFrom)) FROM \(Self.quote(from))
                """)
            if copy.from == copy.to.name { execute("DROP TABLE \(Self.quote(from))") }
        }
        for name in migration.droppedJoinTables where !migration.copiedJoinTables.contains(where: { $0.from == name && $0.to.name == name }) {
            execute("DROP TABLE \(Self.quote(name))")
        }
        for statement in indexStatements() { execute(statement) }
        return statements + makingHierarchyConstraints()
    }

    /// Makes `entity`'s table anew (as `loom_migrating_<name>`), fills it from the saved one,
    /// drops that, gives the new one its name, then its unique indexes.
    private func rebuildStatements(_ entity: EntityDescription, _ sources: [SchemaMigration.ColumnSource], from: String) -> [MigrationStatement] {
        let building = "loom_migrating_\(entity.name)"
        var columns = ["\"Z_PK\"", "\"Z_OPT\""], selected = ["\"Z_PK\"", "\"Z_OPT\""]
        var arguments: [StoredValue] = []
        for (slot, source) in sources.enumerated() {
            columns.append(column(entity, slot))
            func parameter(_ value: StoredValue) -> String {
                arguments.append(value)
                return dialect.parameter(dialect.placeholder(arguments.count), ofColumnType: columnType(entity, slot))
            }
            switch source {
            case .column(let name): selected.append(Self.quote(name))
            case .columnOrValue(let name, let value): selected.append("COALESCE(\(Self.quote(name)), \(parameter(value)))")
            case .value(let value): selected.append(parameter(value))
            }
        }
        let copy = "INSERT INTO \(Self.quote(building)) (\(columns.joined(separator: ", "))) SELECT \(selected.joined(separator: ", ")) FROM \(Self.quote(from))"
        var statements: [MigrationStatement] = [
            .execute(createTable(entity, named: building), []),
            .copyRows(entity: entity, sources: sources, table: from, building: building, sql: copy, arguments: arguments),
            .execute("DROP TABLE \(Self.quote(from))", []),
            .execute("ALTER TABLE \(Self.quote(building)) RENAME TO \(Self.quote(entity.name))", []),
        ]
        statements += dialect.renamingTableIndexes(from: building, to: entity.name).map { .execute($0, []) }
        for (statement, constraint) in zip(uniqueIndexStatements(entity), entity.uniquenessConstraints) {
            statements.append(.uniqueIndex(entity: entity, constraint: constraint, sql: statement, duplicates: duplicateQuery(entity, constraint)))
        }
        return statements
    }

    /// The declared type of a slot's column.
    private func columnType(_ entity: EntityDescription, _ slot: Int) -> String {
        switch entity.storedValue(at: slot) {
        case .attribute(let attribute): dialect.columnType(attribute.type)
        case .foreignKey: dialect.integerType
        case .order: dialect.orderType
        }
    }

    /// For a copy that failed on a required column: per required attribute that could be
    /// left without a value, the query counting the saved rows that hold none (`table` is the
    /// saved table).
    package func missingValueQueries(_ entity: EntityDescription, _ sources: [SchemaMigration.ColumnSource], table: String) -> [(attribute: String, sql: String)] {
        sources.enumerated().compactMap { slot, source in
            guard case .attribute(let attribute) = entity.storedValue(at: slot), !attribute.isOptional else { return nil }
            switch source {
            case .column(let name): return (attribute.name, "SELECT COUNT(*) FROM \(Self.quote(table)) WHERE \(Self.quote(name)) IS NULL")
            case .value(.null): return (attribute.name, "SELECT COUNT(*) FROM \(Self.quote(table))")
            default: return nil
            }
        }
    }

    /// For a unique index that failed: one duplicated value of `constraint` and how many rows
    /// share it (the constraint's columns, then the count).
    private func duplicateQuery(_ entity: EntityDescription, _ constraint: [String]) -> String {
        let columns = constraintColumns(entity, constraint)
        return "SELECT \(columns), COUNT(*) FROM \(Self.quote(entity.name)) GROUP BY \(columns) HAVING COUNT(*) > 1 LIMIT 1"
    }
}

extension MigrationErrors {
    /// A required attribute that `count` saved rows leave without a value.
    package static func missingValues(_ entity: String, attribute: String?, count: Int, location: String, underlying: any Error, storeCode: StoreErrorCode?) -> LoomError {
        guard let attribute else {
            return LoomError(.migrationFailed, "The store at \(location) cannot be migrated: a required value of \(entity) is missing. The store was not changed.",
                             entity: entity, path: location, underlying: underlying, storeCode: storeCode)
        }
        return LoomError(
            .migrationFailed,
            "The store at \(location) cannot be migrated: \(entity).\(attribute) is required in the model, but \(count) saved \(entity) row\(count == 1 ? " has" : "s have") no value for it. Give the attribute a default value, or keep it optional. The store was not changed.",
            entity: entity, attributes: [attribute], path: location, underlying: underlying, storeCode: storeCode)
    }

    /// Saved rows that share a value the model makes unique (`key`: "name = value, …").
    package static func duplicates(_ entity: String, constraint: [String], key: String, count: Int, location: String, underlying: any Error, storeCode: StoreErrorCode?) -> LoomError {
        LoomError(
            .migrationFailed,
            "The store at \(location) cannot be migrated: the model makes \(entity)'s \(constraint.joined(separator: ", ")) unique, but \(count) saved rows share \(key). Remove the duplicates with the previous model first. The store was not changed.",
            entity: entity, attributes: constraint, path: location, underlying: underlying, storeCode: storeCode)
    }
}

/// The errors a failed migration step becomes, worded once for every SQL store.
package enum MigrationErrors {}
