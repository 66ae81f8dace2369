@_spi(LoomStore) package import LoomCore

/// One key space per hierarchy: every entity of a hierarchy takes its keys from its root
/// entity's `loom_keys` row, so that a key names one object of the hierarchy (a fetch of a
/// parent entity, a live query over it, may identify objects by key alone).
///
/// A store written before this held one row per entity, and sibling tables may share keys. On
/// opening it read-write, the root's row is moved past every key of the hierarchy (its tables
/// and its entities' rows), and the entities' own rows go, so a new key is never one in use.
/// Keys saved before then may still collide between sibling tables; what relies on uniqueness
/// checks for that (`KeySpaceCheck`).
extension SQLGenerator {
    /// A hierarchy's key space: its root entity and every entity that inherits from it.
    package struct KeySpace: Sendable {
        package let root: EntityDescription
        /// The root's sub-entities, direct or not (abstract ones too: each has a table).
        package let subentities: [EntityDescription]

        /// The query for the hierarchy's key marks, one row: the next key the space may hand
        /// out (NULL when no table and no row has any), the root's row (NULL when missing), and
        /// how many rows the sub-entities still have.
        package var marksQuery: String {
            let others = subentities.map { SQLGenerator.literal($0.name) }.joined(separator: ", ")
            let highest = ([root] + subentities).map { "SELECT MAX(\"Z_PK\") + 1 FROM \(SQLGenerator.quote($0.name))" }
            let marks = (["SELECT next AS n FROM loom_keys WHERE entity IN (\(SQLGenerator.literal(root.name)), \(others))"] + highest).joined(separator: " UNION ALL ")
            return "SELECT (SELECT MAX(n) FROM (\(marks)) AS marks), (SELECT next FROM loom_keys WHERE entity = \(SQLGenerator.literal(root.name))), "
                + "(SELECT COUNT(*) FROM loom_keys WHERE entity IN (\(others)))"
        }

        /// The statements that make the root's row hand out `next` onwards and drop the
        /// sub-entities' rows; empty when the marks read by ``marksQuery`` need no change.
        package func mergeStatements(next: Int64?, rootNext: Int64?, subentityRows: Int64) -> [String] {
            guard let next, subentityRows > 0 || rootNext.map({ $0 < next }) ?? true else { return [] }
            let others = subentities.map { SQLGenerator.literal($0.name) }.joined(separator: ", ")
            return [
                "DELETE FROM loom_keys WHERE entity IN (\(others))",
                "INSERT INTO loom_keys (entity, next) VALUES (\(SQLGenerator.literal(root.name)), \(next)) ON CONFLICT (entity) DO UPDATE SET next = excluded.next",
            ]
        }
    }

    /// The key spaces that cover more than one entity: one per root entity with sub-entities.
    package var sharedKeySpaces: [KeySpace] {
        schema.entities.compactMap { entity in
            guard entity.superentity == nil else { return nil }
            let members = schema.entities.filter { $0 !== entity && $0.rootEntity === entity }
            return members.isEmpty ? nil : KeySpace(root: entity, subentities: members)
        }
    }

    /// `text` as an SQL string literal.
    static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }
}
