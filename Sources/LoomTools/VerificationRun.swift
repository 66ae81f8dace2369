import Foundation
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import LoomSQL
import GRDB

/// One run of ``StoreVerifier``'s checks inside one read transaction: the findings so far, and
/// what the layout checks learnt (which tables and columns exist), so that a check on a
/// missing table or column is skipped instead of failing.
struct VerificationRun {
    let schema: Schema
    let identifier: UUID
    let state: SavedStoreState
    let limit: Int
    let sql: SQLGenerator
    var findings: [VerificationFinding] = []
    var isTruncated = false
    var objectCount = 0
    var checkCount = 0
    /// The columns of each table that exists, by table name.
    var columns: [String: Set<String>] = [:]
    /// `loom_keys`: each entity's next key; `nil` when the table is missing.
    var keyMarks: [String: Int64]?

    /// A table's column as `PRAGMA table_info` describes it.
    struct Column {
        var name: String
        var type: String
        var notNull: Bool
        var hasDefault: Bool
    }

    init(schema: Schema, identifier: UUID, state: SavedStoreState, limit: Int) {
        self.schema = schema
        self.identifier = identifier
        self.state = state
        self.limit = max(1, limit)
        self.sql = SQLGenerator(schema: schema, dialect: SQLiteDialect())
    }

    /// Every check, in order: SQLite's, then the layout's, then the objects' and their values',
    /// then the history's.
    mutating func perform(in db: Database, integrityCheck: StoreVerifier.IntegrityCheck, progress: ((VerificationProgress) -> Void)?) throws {
        var steps: [(String, (inout VerificationRun, Database) throws -> Void)] = [
            ("\(integrityCheck == .full ? "integrity_check" : "quick_check")", { try $0.checkIntegrity($1, integrityCheck) }),
            ("foreign_key_check", { try $0.checkSQLiteForeignKeys($1) }),
            ("layout", { try $0.checkLayout($1) }),
        ]
        for entity in schema.entities {
            steps.append(("\(entity.name) keys and versions", { try $0.checkKeysAndVersions(entity, $1) }))
            steps.append(("\(entity.name) values", { try $0.checkValues(entity, $1) }))
            for r in schema.relationships(of: entity) {
                switch r.storage {
                case .foreignKey:
                    steps.append(("\(entity.name).\(r.description.name)", { try $0.checkForeignKey(r, $1) }))
                case .inverseForeignKey:
                    if r.description.kind == .orderedToMany { steps.append(("\(entity.name).\(r.description.name) order", { try $0.checkOrder(r, $1) })) }
                case .joinTable(let table, let own, _):
                    // Each join table once, from its source side (the entity that declares it,
                    // not the sub-entities that inherit it).
                    if own == JoinTable.sourceColumn, table.sourceEntityName == entity.name { steps.append((table.name, { try $0.checkJoinTable(r, $1) })) }
                    if r.description.kind == .orderedToMany { steps.append(("\(entity.name).\(r.description.name) order", { try $0.checkOrder(r, $1) })) }
                }
            }
            for constraint in entity.uniquenessConstraints {
                steps.append(("\(entity.name) unique \(constraint.joined(separator: ","))", { try $0.checkUniqueness(entity, constraint, $1) }))
            }
        }
        steps.append(("history", { try $0.checkHistory($1) }))
        for (i, (name, step)) in steps.enumerated() {
            progress?(VerificationProgress(completed: i, total: steps.count, step: name))
            do {
                try step(&self, db)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB {
                // A damaged page stops this check, not the others.
                findings.append(VerificationFinding(kind: .sqliteIntegrity, message: "Reading for the check '\(name)' failed: \(error.message ?? "\(error.resultCode)")."))
            }
            checkCount += 1
        }
        progress?(VerificationProgress(completed: steps.count, total: steps.count, step: "done"))
    }

    // MARK: Reporting

    /// The URI of an object of `entity`.
    func uri(_ entity: String, _ key: Int64) -> String {
        AnyObjectID(storeIdentifier: identifier, entityName: entity, primaryKey: key).uriRepresentation.absoluteString
    }

    /// The findings `make` builds from the rows of `query`, at most ``limit`` of them, and
    /// whether more were left out. Added to the run with ``add(_:)``.
    func select(_ db: Database, _ query: String, arguments: StatementArguments = [], _ make: (Row) throws -> VerificationFinding?) throws -> (findings: [VerificationFinding], isTruncated: Bool) {
        // No LIMIT in the SQL: `make` may skip rows. SQLite produces rows as the cursor asks, so
        // stopping early stops the scan.
        let rows = try Row.fetchCursor(db, sql: query, arguments: arguments)
        var found: [VerificationFinding] = []
        while let row = try rows.next() {
            guard let finding = try make(row) else { continue }
            if found.count == limit { return (found, true) }
            found.append(finding)
        }
        return (found, false)
    }

    mutating func add(_ selected: (findings: [VerificationFinding], isTruncated: Bool)) {
        findings += selected.findings
        if selected.isTruncated { isTruncated = true }
    }

    static func quote(_ name: String) -> String { SQLGenerator.quote(name) }

    /// Whether `table` exists with every one of `columns`.
    func has(_ table: String, _ columns: [String]) -> Bool {
        guard let existing = self.columns[table] else { return false }
        return columns.allSatisfy(existing.contains)
    }

    /// The rows of `entity` and of its sub-entities as one table of `columns` (a
    /// relationship's keys name objects of any of them): the entity's own table when it has
    /// no sub-entities.
    func hierarchyTable(_ entity: EntityDescription, _ columns: [String]) -> String {
        let members = schema.concreteEntities(of: entity)
        if members.count == 1, members[0] === entity { return Self.quote(entity.name) }
        let list = columns.map(Self.quote).joined(separator: ", ")
        let parts = members.filter { has($0.name, columns) }.map { "SELECT \(list) FROM \(Self.quote($0.name))" }
        return parts.isEmpty ? "(SELECT \(list) FROM \(Self.quote(entity.name)) WHERE 0)" : "(" + parts.joined(separator: " UNION ALL ") + ")"
    }

    /// Whether `entity`'s table exists with its key, version and the columns of `slots`.
    func has(_ entity: EntityDescription, slots: [Int] = []) -> Bool {
        has(entity.name, ["Z_PK", "Z_OPT"] + slots.map(entity.columnName(at:)))
    }

    // MARK: SQLite

    mutating func checkIntegrity(_ db: Database, _ check: StoreVerifier.IntegrityCheck) throws {
        let pragma = check == .full ? "integrity_check" : "quick_check"
        for message in try String.fetchAll(db, sql: "PRAGMA \(pragma)(\(limit))") where message != "ok" {
            findings.append(VerificationFinding(kind: .sqliteIntegrity, message: "SQLite's \(pragma): \(message)"))
        }
    }

    mutating func checkSQLiteForeignKeys(_ db: Database) throws {
        let found = try select(db, "SELECT \"table\", rowid, parent FROM pragma_foreign_key_check") { row in
            let table: String = row[0], key: Int64? = row[1], parent: String = row[2]
            let entity = schema.entity(named: table)?.name
            return VerificationFinding(
                kind: .sqliteForeignKey, entity: table, object: entity.flatMap { name in key.map { uri(name, $0) } },
                message: "A row of \(table)\(key.map { " (rowid \($0))" } ?? "") refers to a missing row of \(parent) (PRAGMA foreign_key_check).")
        }
        add(found)
    }
}
