package import Foundation
@_spi(LoomStore) package import LoomCore

/// Uniqueness constraints declared on an entity with sub-entities (``HierarchyConstraint``).
///
/// Each entity of a hierarchy has a table of its own, and a table's unique index sees its own
/// rows only. A constraint of a parent is kept in one more table, named after it, that holds
/// the constraint's values of every member's rows (with the row's entity and key) under a
/// unique index; triggers on the members' tables keep it in step, in the statement that
/// changes the row. So the database refuses a duplicate whichever two tables its rows are in,
/// with any number of writers, and in every path that writes rows (saves, batch requests,
/// `loom load`), as a unique index would; the store reports it as a uniqueness violation.
///
/// The tables and triggers are made with the store, and made anew by every migration (dropped
/// first: a rebuilt or altered member table must not keep a trigger naming its old columns),
/// then filled from the members' rows, so that saved duplicates fail the migration.
extension SQLGenerator {
    /// The statements that make the tables and triggers of `schema`'s hierarchy constraints,
    /// for a new (empty) store.
    package func hierarchyConstraintStatements() -> [String] {
        schema.hierarchyConstraints.flatMap { constraint in
            [createHierarchyConstraintTable(constraint), hierarchyConstraintIndex(constraint), keyIndex(constraint)]
                + constraint.members.flatMap { dialect.hierarchyConstraintTriggers(triggerPlan(constraint, $0)) }
        }
    }

    /// What a migration runs first: drops the tables and triggers of the saved schema's
    /// hierarchy constraints.
    package func droppingHierarchyConstraints(of saved: Schema) -> [MigrationStatement] {
        saved.hierarchyConstraints.flatMap { constraint in
            constraint.members.flatMap { dialect.droppingHierarchyConstraintTriggers(triggerPlan(constraint, $0)) }
                + ["DROP TABLE IF EXISTS \(Self.quote(constraint.name))"]
        }.map { .execute($0, []) }
    }

    /// What a migration runs last: the tables and triggers of this schema's hierarchy
    /// constraints, filled from the members' rows before the unique index is made (saved rows
    /// that break it fail the migration, naming them).
    package func makingHierarchyConstraints() -> [MigrationStatement] {
        schema.hierarchyConstraints.flatMap { constraint -> [MigrationStatement] in
            let columns = shadowColumns(constraint)
            var statements: [MigrationStatement] = [.execute(createHierarchyConstraintTable(constraint), [])]
            for member in constraint.members {
                let values = constraint.attributes.map { memberColumn(member, $0) }
                statements.append(.execute("INSERT INTO \(Self.quote(constraint.name)) (\"Z_ENT\", \"Z_PK\", \(columns.joined(separator: ", "))) SELECT \(Self.literal(member.name)), \"Z_PK\", \(values.joined(separator: ", ")) FROM \(Self.quote(member.name))", []))
            }
            statements.append(.uniqueIndex(entity: constraint.owner, constraint: constraint.attributes, sql: hierarchyConstraintIndex(constraint),
                                           duplicates: "SELECT \(columns.joined(separator: ", ")), COUNT(*) FROM \(Self.quote(constraint.name)) WHERE \(columns.map { "\($0) IS NOT NULL" }.joined(separator: " AND ")) GROUP BY \(columns.joined(separator: ", ")) HAVING COUNT(*) > 1 LIMIT 1"))
            statements.append(.execute(keyIndex(constraint), []))
            for member in constraint.members {
                statements += dialect.hierarchyConstraintTriggers(triggerPlan(constraint, member)).map { .execute($0, []) }
            }
            return statements
        }
    }

    /// The error of a unique violation in `table` when it is a hierarchy constraint's (through
    /// a member table's trigger), for a change of `entity`'s object `key` when known; `nil` for
    /// any other table.
    package func hierarchyViolation(
        inTable table: String?, entity: EntityDescription?, key: Int64?, store: UUID, underlying: any Error, storeCode: StoreErrorCode?
    ) -> LoomError? {
        guard let table, let across = schema.hierarchyConstraints.first(where: { $0.name == table }) else { return nil }
        let entityName = entity?.name ?? across.owner.name
        return LoomError(
            .uniquenessViolation,
            "Another \(across.owner.name) already has the same \(across.attributes.joined(separator: ", ")), which must be unique across \(across.owner.name)'s sub-entities.",
            entity: entityName, attributes: across.attributes,
            objectID: key.map { AnyObjectID(storeIdentifier: store, entityName: entityName, primaryKey: $0) },
            underlying: underlying, storeCode: storeCode)
    }

    /// See ``hierarchyConstraintTables``.
    static func hierarchyConstraintTables(of schema: Schema) -> [String: [String]] {
        var out: [String: [String]] = [:]
        for constraint in schema.hierarchyConstraints {
            for member in constraint.members { out[member.name, default: []].append(constraint.name) }
        }
        return out
    }

    private func createHierarchyConstraintTable(_ constraint: HierarchyConstraint) -> String {
        let owner = constraint.owner
        let columns = constraint.attributes.map { name in
            let type = owner.storedValueIndex(named: name).map { slot -> String in
                if case .attribute(let attribute) = owner.storedValue(at: slot) { return dialect.columnType(attribute.type) }
                return dialect.integerType
            } ?? dialect.integerType
            return "\(Self.quote(shadowColumnName(name))) \(type)"
        }
        return "CREATE TABLE IF NOT EXISTS \(Self.quote(constraint.name)) (\"Z_ENT\" TEXT NOT NULL, \"Z_PK\" \(dialect.integerType) NOT NULL, \(columns.joined(separator: ", ")))"
    }

    private func hierarchyConstraintIndex(_ constraint: HierarchyConstraint) -> String {
        "CREATE UNIQUE INDEX \(Self.quote(constraint.uniqueIndexName)) ON \(Self.quote(constraint.name)) (\(shadowColumns(constraint).joined(separator: ", ")))"
    }

    /// The triggers find a member's entry by entity and key.
    private func keyIndex(_ constraint: HierarchyConstraint) -> String {
        "CREATE INDEX \(Self.quote(constraint.keyIndexName)) ON \(Self.quote(constraint.name)) (\"Z_PK\", \"Z_ENT\")"
    }

    private func shadowColumnName(_ attribute: String) -> String { "C_" + attribute }

    private func shadowColumns(_ constraint: HierarchyConstraint) -> [String] {
        constraint.attributes.map { Self.quote(shadowColumnName($0)) }
    }

    private func memberColumn(_ member: EntityDescription, _ attribute: String) -> String {
        member.storedValueIndex(named: attribute).map { column(member, $0) } ?? Self.quote(attribute)
    }

    private func triggerPlan(_ constraint: HierarchyConstraint, _ member: EntityDescription) -> HierarchyConstraintTriggers {
        HierarchyConstraintTriggers(
            name: Self.quote(constraint.triggerName(for: member)), nameText: constraint.triggerName(for: member),
            table: Self.quote(member.name), shadow: Self.quote(constraint.name), entity: Self.literal(member.name),
            memberColumns: constraint.attributes.map { memberColumn(member, $0) }, shadowColumns: shadowColumns(constraint))
    }
}

/// What a dialect needs to write the triggers of one member table of a hierarchy constraint:
/// names and columns, quoted (``SQLDialect/hierarchyConstraintTriggers(_:)``).
package struct HierarchyConstraintTriggers: Sendable {
    /// The quoted base name of the triggers (and of PostgreSQL's function), and the same unquoted.
    package let name: String
    package let nameText: String
    /// The member's table, the constraint's table, and the member's entity name as an SQL literal.
    package let table: String
    package let shadow: String
    package let entity: String
    /// The constraint's columns in the member's table, and in the constraint's table, in order.
    package let memberColumns: [String]
    package let shadowColumns: [String]

    /// `INSERT INTO` the constraint's table of the row `NEW`.
    package var insertNew: String {
        "INSERT INTO \(shadow) (\"Z_ENT\", \"Z_PK\", \(shadowColumns.joined(separator: ", "))) VALUES (\(entity), NEW.\"Z_PK\", \(memberColumns.map { "NEW." + $0 }.joined(separator: ", ")))"
    }
    /// `UPDATE` of the entry of the row `NEW` with its values.
    package var updateNew: String {
        "UPDATE \(shadow) SET \(zip(shadowColumns, memberColumns).map { "\($0) = NEW.\($1)" }.joined(separator: ", ")) WHERE \"Z_PK\" = NEW.\"Z_PK\" AND \"Z_ENT\" = \(entity)"
    }
    /// `DELETE` of the entry of the row `OLD`.
    package var deleteOld: String {
        "DELETE FROM \(shadow) WHERE \"Z_PK\" = OLD.\"Z_PK\" AND \"Z_ENT\" = \(entity)"
    }
}
