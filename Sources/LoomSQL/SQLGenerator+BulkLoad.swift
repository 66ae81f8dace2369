@_spi(LoomStore) package import LoomCore

/// The statements of a bulk load (``StoreBulkWriter``), the same for every SQL store.
extension SQLGenerator {
    /// The insert of one row of `entity`, every column in the table's order (key, version, then
    /// the stored values), with `rows` rows of placeholders.
    package func bulkInsert(_ entity: EntityDescription, rows: Int) -> String {
        let columns = (["Z_PK", "Z_OPT"] + (0..<entity.storedValueCount).map(entity.columnName(at:))).map(Self.quote)
        return "INSERT INTO \(Self.quote(entity.name)) (\(columns.joined(separator: ", "))) VALUES \(placeholderRows(rows, of: columns.count))"
    }

    /// The insert of `rows` rows of a join table.
    package func bulkLink(_ table: JoinTable, rows: Int) -> String {
        "INSERT INTO \(Self.quote(table.name)) (\"Z_SOURCE\", \"Z_TARGET\") VALUES \(placeholderRows(rows, of: 2))"
    }

    /// `(?, ?), (?, ?)` in the dialect's placeholders.
    private func placeholderRows(_ rows: Int, of width: Int) -> String {
        (0..<rows).map { row in
            "(" + (1...width).map { dialect.placeholder(row * width + $0) }.joined(separator: ", ") + ")"
        }.joined(separator: ", ")
    }

    /// One `(owner, target)` whose stored reference names no row of the destination, for the
    /// side of `r` that stores it; `nil` for a side that stores nothing.
    package func firstDanglingReference(_ r: ResolvedRelationship) -> String? {
        let destination = destinationTable(r)
        switch r.storage {
        case .foreignKey(let slot):
            let fk = Self.quote(r.source.columnName(at: slot))
            return "SELECT s.\"Z_PK\", s.\(fk) FROM \(Self.quote(r.source.name)) AS s WHERE s.\(fk) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM \(destination) WHERE \"Z_PK\" = s.\(fk)) LIMIT 1"
        case .joinTable(let join, let own, let other) where own == JoinTable.sourceColumn:
            let (own, other) = (Self.quote(own), Self.quote(other))
            return "SELECT j.\(own), j.\(other) FROM \(Self.quote(join.name)) AS j WHERE NOT EXISTS (SELECT 1 FROM \(destination) WHERE \"Z_PK\" = j.\(other)) LIMIT 1"
        default:
            return nil
        }
    }

    /// The highest key of `entity`'s table (NULL when it is empty).
    package func highestKey(_ entity: EntityDescription) -> String {
        "SELECT MAX(\"Z_PK\") FROM \(Self.quote(entity.name))"
    }
}
