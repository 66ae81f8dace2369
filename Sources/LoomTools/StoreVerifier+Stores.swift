import Foundation
@_spi(LoomStore) import LoomCore

/// The checks of a store reached through the store SPI (a PostgreSQL store): the store's own
/// check of its storage (``StoreMaintenance/checkIntegrity(quick:limit:)``), then Loom's
/// invariants on the rows the store returns: keys and versions, every attribute value, to-one
/// foreign keys and one-to-one inverses, uniqueness constraints. What a server enforces itself
/// (column types, `NOT NULL`, unique indexes, the join tables' rows) it is trusted with, as long
/// as its check finds its constraints and indexes valid.
extension StoreVerifier {
    func verify(_ store: any StoreMaintenance, progress: ((VerificationProgress) -> Void)?) throws(LoomError) -> VerificationReport {
        var run = SPIVerificationRun(store: store, limit: max(1, findingLimitPerCheck))
        let schema = store.schema
        var steps: [(String, (inout SPIVerificationRun) throws -> Void)] = [
            ("store integrity", { [integrityCheck] in try $0.checkIntegrity(quick: integrityCheck == .quick) }),
        ]
        for entity in schema.entities {
            steps.append(("\(entity.name) keys, versions and values", { try $0.checkRows(of: entity) }))
            for r in schema.relationships(of: entity) {
                if case .foreignKey = r.storage { steps.append(("\(entity.name).\(r.description.name)", { try $0.checkForeignKey(r) })) }
            }
            for constraint in entity.uniquenessConstraints {
                steps.append(("\(entity.name) unique \(constraint.joined(separator: ","))", { try $0.checkUniqueness(entity, constraint) }))
            }
        }
        do {
            run.keyMarks = try store.maintenanceState().nextKeys
            for (i, (name, step)) in steps.enumerated() {
                progress?(VerificationProgress(completed: i, total: steps.count, step: name))
                try step(&run)
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw LoomError(.storeFailure, "The store at \(location) could not be read to the end of its checks.", underlying: error)
        }
        progress?(VerificationProgress(completed: steps.count, total: steps.count, step: "done"))
        return VerificationReport(
            store: location, storeIdentifier: store.identifier.uuidString, objectCount: run.objectCount, checkCount: steps.count,
            findings: run.findings, isTruncated: run.isTruncated)
    }
}

/// One run of the SPI checks: the findings so far, and each entity's rows once read.
private struct SPIVerificationRun {
    let store: any StoreMaintenance
    let limit: Int
    var keyMarks: [String: Int64] = [:]
    var findings: [VerificationFinding] = []
    var isTruncated = false
    var objectCount = 0
    /// Each entity's rows by key, read once.
    private var rows: [String: [Int64: StoreRow]] = [:]

    init(store: any StoreMaintenance, limit: Int) {
        self.store = store
        self.limit = limit
    }

    func uri(_ entity: String, _ key: Int64) -> String {
        AnyObjectID(storeIdentifier: store.identifier, entityName: entity, primaryKey: key).uriRepresentation.absoluteString
    }

    /// Adds the findings of one check, at most ``limit`` of them.
    mutating func add(_ found: [VerificationFinding]) {
        findings += found.prefix(limit)
        if found.count > limit { isTruncated = true }
    }

    mutating func rows(of entity: EntityDescription) throws -> [Int64: StoreRow] {
        if let cached = rows[entity.name] { return cached }
        let read = Dictionary(try store.fetch(StoreQuery(entity: entity)).map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        rows[entity.name] = read
        return read
    }

    mutating func checkIntegrity(quick: Bool) throws {
        let problems = try store.checkIntegrity(quick: quick, limit: limit)
        add(problems.map { problem in
            VerificationFinding(kind: problem.kind == .foreignKey ? .sqliteForeignKey : .storeIntegrity, entity: problem.table,
                                object: problem.table.flatMap { table in problem.key.map { uri(table, $0) } }, message: problem.message)
        })
    }

    /// Keys between 1 and the allocator's mark, versions of at least 1, values Loom reads back.
    mutating func checkRows(of entity: EntityDescription) throws {
        let name = entity.name, mark = keyMarks[name] ?? 1
        var found: [VerificationFinding] = []
        let rows = try rows(of: entity)
        objectCount += rows.count
        for key in rows.keys.sorted() {
            let row = rows[key]!
            if key < 1 || key >= mark {
                found.append(VerificationFinding(
                    kind: .keyOutOfRange, entity: name, object: uri(name, key),
                    message: key < 1 ? "\(name) \(key) has a key below 1."
                        : "\(name) \(key) has a key at or above the key allocator's mark (\(mark)): a new \(name) may be given the same key."))
            }
            if row.version < 1 {
                found.append(VerificationFinding(kind: .invalidVersion, entity: name, object: uri(name, key),
                                                 message: "\(name) \(key) has version \(row.version); versions start at 1."))
            }
            for (i, attribute) in entity.attributes.enumerated() {
                guard let problem = VerificationRun.problem(with: row.values[i], isUTF8: true, of: attribute) else { continue }
                found.append(VerificationFinding(kind: problem.kind, entity: name, property: attribute.name, object: uri(name, key),
                                                 message: "\(name) \(key)'s \(attribute.name) \(problem.sentence)."))
            }
        }
        add(found)
    }

    /// A to-one's foreign key points at an existing object; when its inverse is to-one too,
    /// that object points back.
    mutating func checkForeignKey(_ r: ResolvedRelationship) throws {
        guard case .foreignKey(let slot) = r.storage else { return }
        let source = r.source.name, destination = r.destination.name, name = r.description.name, inverse = r.inverse.name
        var inverseSlot: Int?
        if case .foreignKey(let s) = store.schema.relationship(r.inverseIndex, of: r.destination).storage { inverseSlot = s }
        let owners = try rows(of: r.source), targets = try rows(of: r.destination)
        var found: [VerificationFinding] = []
        for key in owners.keys.sorted() {
            guard case .integer(let target) = owners[key]!.values[slot] else { continue }
            guard let row = targets[target] else {
                found.append(VerificationFinding(kind: .danglingForeignKey, entity: source, property: name, object: uri(source, key),
                                                 message: "\(source) \(key)'s \(name) points at \(destination) \(target), which does not exist."))
                continue
            }
            if let inverseSlot, row.values[inverseSlot] != .integer(key) {
                let back = if case .integer(let k) = row.values[inverseSlot] { "\(source) \(k)" } else { "nil" }
                found.append(VerificationFinding(kind: .inverseMismatch, entity: source, property: name, object: uri(source, key),
                                                 message: "\(source) \(key)'s \(name) is \(destination) \(target), whose \(inverse) is \(back), not \(source) \(key)."))
            }
        }
        add(found)
    }

    /// No two objects share the values of a uniqueness constraint (NULLs never clash).
    mutating func checkUniqueness(_ entity: EntityDescription, _ constraint: [String]) throws {
        let slots = constraint.compactMap { entity.storedValueIndex(named: $0) }
        guard slots.count == constraint.count else { return }
        var byValues: [[StoredValue]: [Int64]] = [:]
        for (key, row) in try rows(of: entity) {
            let values = slots.map { row.values[$0] }
            if values.contains(.null) { continue }
            byValues[values, default: []].append(key)
        }
        let name = entity.name, list = constraint.joined(separator: ", ")
        var found: [VerificationFinding] = []
        for keys in byValues.values.map({ $0.sorted() }).sorted(by: { $0[0] < $1[0] }) where keys.count > 1 {
            let last = keys.last!
            let others = keys.dropLast().prefix(5).map { uri(name, $0) }.joined(separator: ", ")
            found.append(VerificationFinding(
                kind: .uniquenessViolation, entity: name, property: constraint.joined(separator: ","), object: uri(name, last),
                message: "\(name) \(last) has the same \(list) as \(others)\(keys.count > 6 ? " and \(keys.count - 6) more" : ""), which must be unique."))
        }
        add(found)
    }
}
