import Foundation
@_spi(LoomStore) import LoomCore
import GRDB
import LoomSQLite

/// The object checks: one statement per entity, relationship or constraint, each a single
/// scan served by the primary key or an index, returning only the rows that are wrong.
extension VerificationRun {
    /// Versions are at least 1 (inserts write 1, updates add 1); keys are at least 1 and below
    /// the allocator's mark (`loom_keys.next` is the next key it hands out).
    mutating func checkKeysAndVersions(_ entity: EntityDescription, _ db: Database) throws {
        guard has(entity) else { return }
        let table = Self.quote(entity.name)
        objectCount += try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
        // Without loom_keys (reported by the layout check) only the lower bound is checked.
        let mark = keyMarks.map { keyMark(of: entity, in: $0) } ?? Int64.max
        let name = entity.name
        let found = try select(db, "SELECT Z_PK, Z_OPT FROM \(table) WHERE Z_OPT IS NULL OR Z_OPT < 1 OR Z_PK < 1 OR Z_PK >= ?", arguments: [mark]) { row in
            let key: Int64 = try row.decode(atIndex: 0), version: Int64? = try row.decode(atIndex: 1)
            if key < 1 || key >= mark {
                return VerificationFinding(
                    kind: .keyOutOfRange, entity: name, object: uri(name, key),
                    message: key < 1 ? "\(name) \(key) has a key below 1."
                        : "\(name) \(key) has a key at or above the key allocator's mark (\(mark)): a new \(name) may be given the same key.")
            }
            return VerificationFinding(kind: .invalidVersion, entity: name, object: uri(name, key),
                                       message: "\(name) \(key) has version \(version.map(String.init) ?? "NULL"); versions start at 1.")
        }
        add(found)
    }

    /// A to-one relationship's foreign key points at an existing row; when its inverse is
    /// to-one too, that row points back.
    mutating func checkForeignKey(_ r: ResolvedRelationship, _ db: Database) throws {
        guard case .foreignKey(let slot) = r.storage, has(r.source, slots: [slot]), has(r.destination) else { return }
        let source = r.source.name, destination = r.destination.name, name = r.description.name
        let fk = Self.quote(r.source.columnName(at: slot))
        var inverseColumn: String?
        var destinationColumns = ["Z_PK"]
        if case .foreignKey(let inverseSlot) = schema.relationship(r.inverseIndex, of: r.destination).storage, has(r.destination, slots: [inverseSlot]) {
            inverseColumn = Self.quote(r.destination.columnName(at: inverseSlot))
            destinationColumns.append(r.destination.columnName(at: inverseSlot))
        }
        let back = inverseColumn.map { "d.\($0)" } ?? "NULL"
        let mismatch = inverseColumn.map { " OR d.\($0) IS NOT s.Z_PK" } ?? ""
        let query = """
            SELECT s.Z_PK, s.\(fk), d.Z_PK IS NULL, \(back) FROM \(Self.quote(source)) AS s \
            LEFT JOIN \(hierarchyTable(r.destination, destinationColumns)) AS d ON d.Z_PK = s.\(fk) \
            WHERE s.\(fk) IS NOT NULL AND (d.Z_PK IS NULL\(mismatch))
            """
        let inverse = r.inverse.name
        let found = try select(db, query) { row in
            let key: Int64 = row[0], target = row[1] as DatabaseValue, missing: Bool = row[2], pointsBack: Int64? = row[3]
            let targetText = Int64.fromDatabaseValue(target).map(String.init) ?? "a non-key value"
            if missing {
                return VerificationFinding(kind: .danglingForeignKey, entity: source, property: name, object: uri(source, key),
                                           message: "\(source) \(key)'s \(name) points at \(destination) \(targetText), which does not exist.")
            }
            return VerificationFinding(
                kind: .inverseMismatch, entity: source, property: name, object: uri(source, key),
                message: "\(source) \(key)'s \(name) is \(destination) \(targetText), whose \(inverse) is \(pointsBack.map { "\(source) \($0)" } ?? "nil"), not \(source) \(key).")
        }
        add(found)
    }

    /// Every row of a many-to-many join table names two existing objects.
    mutating func checkJoinTable(_ r: ResolvedRelationship, _ db: Database) throws {
        guard case .joinTable(let table, _, _) = r.storage, has(table.name, [JoinTable.sourceColumn, JoinTable.targetColumn]),
              has(r.source), has(r.destination) else { return }
        let source = r.source.name, target = r.destination.name, name = r.description.name
        let query = """
            SELECT j.Z_SOURCE, j.Z_TARGET, s.Z_PK IS NULL, t.Z_PK IS NULL FROM \(Self.quote(table.name)) AS j \
            LEFT JOIN \(hierarchyTable(r.source, ["Z_PK"])) AS s ON s.Z_PK = j.Z_SOURCE LEFT JOIN \(hierarchyTable(r.destination, ["Z_PK"])) AS t ON t.Z_PK = j.Z_TARGET \
            WHERE s.Z_PK IS NULL OR t.Z_PK IS NULL
            """
        let found = try select(db, query) { row in
            let sourceKey: Int64 = try row.decode(atIndex: 0), targetKey: Int64 = try row.decode(atIndex: 1)
            let sourceMissing: Bool = try row.decode(atIndex: 2), targetMissing: Bool = try row.decode(atIndex: 3)
            let missing = [sourceMissing ? "\(source) \(sourceKey)" : nil, targetMissing ? "\(target) \(targetKey)" : nil].compactMap { $0 }
            // The object named is the side that exists, whose relationship shows a ghost.
            let object = sourceMissing && !targetMissing ? uri(target, targetKey) : uri(source, sourceKey)
            return VerificationFinding(
                kind: .danglingJoinRow, entity: source, property: name, object: object,
                message: "\(table.name) links \(source) \(sourceKey) and \(target) \(targetKey), but \(missing.joined(separator: " and ")) does not exist.")
        }
        add(found)
    }

    /// An ordered relationship's order, saved on its owner, is whole 8-byte keys, each once.
    /// (Loom tolerates an order that misses members, added from the other side, or lists former
    /// ones: it appends the first and skips the second when it reads the order.)
    mutating func checkOrder(_ r: ResolvedRelationship, _ db: Database) throws {
        guard let slot = r.source.storedValueIndex(ofRelationship: r.index), has(r.source, slots: [slot]) else { return }
        let owner = r.source.name
        let column = Self.quote(r.source.columnName(at: slot))
        let found = try select(db, "SELECT Z_PK, \(column) FROM \(Self.quote(owner)) WHERE \(column) IS NOT NULL") { row in
            let key: Int64 = try row.decode(atIndex: 0)
            return Self.orderFinding(StoredValue((row[1] as DatabaseValue).storage), of: r, owner: key, uri: uri(owner, key))
        }
        add(found)
    }

    /// What is wrong with one owner's saved order of the ordered relationship `r` (a value that is
    /// not NULL), or `nil` when it is whole keys, each listed once. Shared by every store's check.
    static func orderFinding(_ value: StoredValue, of r: ResolvedRelationship, owner key: Int64, uri: String) -> VerificationFinding? {
        let owner = r.source.name, name = r.description.name
        guard case .blob(let data) = value, data.count % 8 == 0 else {
            return VerificationFinding(kind: .malformedOrder, entity: owner, property: name, object: uri,
                                       message: "\(owner) \(key)'s saved order of \(name) is not a list of 8-byte keys; Loom reads it as empty.")
        }
        var seen = Set<Int64>(minimumCapacity: data.count / 8)
        let duplicate: Int64? = data.withUnsafeBytes { bytes in
            for offset in stride(from: 0, to: bytes.count, by: 8) {
                let member = Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int64.self))
                if !seen.insert(member).inserted { return member }
            }
            return nil
        }
        guard let duplicate else { return nil }
        return VerificationFinding(kind: .duplicateInOrder, entity: owner, property: name, object: uri,
                                   message: "\(owner) \(key)'s saved order of \(name) lists \(r.destination.name) \(duplicate) more than once.")
    }

    /// No two objects share the values of a uniqueness constraint (NULLs never clash, as in
    /// SQLite's unique indexes). The values themselves are not printed.
    mutating func checkUniqueness(_ entity: EntityDescription, _ constraint: [String], _ db: Database) throws {
        let names = constraint.map { name in entity.storedValueIndex(named: name).map(entity.columnName(at:)) ?? name }
        guard has(entity.name, ["Z_PK"] + names) else { return }
        let columns = names.map(Self.quote)
        let query = """
            SELECT group_concat(Z_PK) FROM \(Self.quote(entity.name)) \
            WHERE \(columns.map { "\($0) IS NOT NULL" }.joined(separator: " AND ")) \
            GROUP BY \(columns.joined(separator: ", ")) HAVING COUNT(*) > 1
            """
        let name = entity.name, list = constraint.joined(separator: ", ")
        let found = try select(db, query) { row in
            let keys = (row[0] as String).split(separator: ",").compactMap { Int64($0) }.sorted()
            guard let last = keys.last else { return nil }
            let others = keys.dropLast().prefix(5).map { uri(name, $0) }.joined(separator: ", ")
            return VerificationFinding(
                kind: .uniquenessViolation, entity: name, property: constraint.joined(separator: ","), object: uri(name, last),
                message: "\(name) \(last) has the same \(list) as \(others)\(keys.count > 6 ? " and \(keys.count - 6) more" : ""), which must be unique.")
        }
        add(found)
    }
}
