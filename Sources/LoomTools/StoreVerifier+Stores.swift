import Foundation
@_spi(LoomStore) import LoomCore

/// The checks of a store reached through the store SPI (a PostgreSQL store): the store's own
/// check of its storage (``StoreMaintenance/checkIntegrity(quick:limit:)``), then Loom's
/// invariants on the rows the store returns: keys and versions, every attribute value, to-one
/// foreign keys and one-to-one inverses, ordered relationships' saved orders, uniqueness
/// constraints, and the history `fetchHistory` reads. What a server enforces itself (column
/// types, `NOT NULL`, unique indexes, the join tables' rows) it is trusted with, as long as its
/// check finds its constraints and indexes valid. Rows are read a page at a time
/// (``StoreRowPages``); the findings' sentences are the SQLite checks' (``VerificationRun``).
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
                if r.description.kind == .orderedToMany { steps.append(("\(entity.name).\(r.description.name) order", { try $0.checkOrder(r) })) }
            }
            for constraint in entity.uniquenessConstraints {
                steps.append(("\(entity.name) unique \(constraint.joined(separator: ","))", { try $0.checkUniqueness(entity, constraint) }))
            }
        }
        for constraint in schema.hierarchyConstraints {
            steps.append(("\(constraint.owner.name) unique \(constraint.attributes.joined(separator: ",")) across its sub-entities", { try $0.checkUniqueness(across: constraint) }))
        }
        steps.append(("history", { try $0.checkHistory() }))
        do {
            run.keyMarks = try store.maintenanceState().nextKeys
            for (i, (name, step)) in steps.enumerated() {
                progress?(VerificationProgress(completed: i, total: steps.count, step: name))
                try step(&run)
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw LoomError(.storeFailure, "The store at \(CredentialRedaction.redacting(location)) could not be read to the end of its checks.", underlying: error)
        }
        progress?(VerificationProgress(completed: steps.count, total: steps.count, step: "done"))
        return VerificationReport(
            store: CredentialRedaction.redacting(location), storeIdentifier: store.identifier.uuidString, objectCount: run.objectCount, checkCount: steps.count,
            findings: run.findings, isTruncated: run.isTruncated)
    }
}

/// One run of the SPI checks: the findings so far.
private struct SPIVerificationRun {
    let store: any StoreMaintenance
    let limit: Int
    var keyMarks: [String: Int64] = [:]
    var findings: [VerificationFinding] = []
    var isTruncated = false
    var objectCount = 0

    init(store: any StoreMaintenance, limit: Int) {
        self.store = store
        self.limit = limit
    }

    func uri(_ entity: String, _ key: Int64) -> String { makesURIs(entity, key) }

    /// ``uri(_:_:)`` as a closure that holds no part of the run: a page's closure calls it while
    /// the run collects its findings.
    var makesURIs: @Sendable (String, Int64) -> String {
        let identifier = store.identifier
        return { entity, key in AnyObjectID(storeIdentifier: identifier, entityName: entity, primaryKey: key).uriRepresentation.absoluteString }
    }

    /// Adds the findings of one check, at most ``limit`` of them.
    mutating func add(_ found: [VerificationFinding]) {
        findings += found.prefix(limit)
        if found.count > limit { isTruncated = true }
    }

    /// Collects a check's findings, keeping one past ``limit`` (which says that some were left
    /// out) and no more, so that a badly damaged store does not fill memory with them.
    struct Found {
        let limit: Int
        var findings: [VerificationFinding] = []
        mutating func append(_ finding: VerificationFinding?) {
            if let finding, findings.count <= limit { findings.append(finding) }
        }
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
        let name = entity.name, mark = keyMark(of: entity, in: keyMarks)
        var found = Found(limit: limit), objects = 0
        let uri = makesURIs
        try StoreRowPages.forEach(of: entity, in: store) { rows in
            objects += rows.count
            for row in rows {
                let key = row.key
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
        }
        objectCount += objects
        add(found.findings)
    }

    /// A to-one's foreign key points at an existing object; when its inverse is to-one too,
    /// that object points back.
    mutating func checkForeignKey(_ r: ResolvedRelationship) throws {
        guard case .foreignKey(let slot) = r.storage else { return }
        let source = r.source.name, destination = r.destination.name, name = r.description.name, inverse = r.inverse.name
        var inverseSlot: Int?
        if case .foreignKey(let s) = store.schema.relationship(r.inverseIndex, of: r.destination).storage { inverseSlot = s }
        var found = Found(limit: limit)
        let (store, uri) = (self.store, makesURIs)
        try StoreRowPages.forEach(of: r.source, in: store) { owners in
            // The page's targets, read by key.
            let wanted = owners.compactMap { owner -> Int64? in if case .integer(let target) = owner.values[slot] { target } else { nil } }
            // A destination with sub-entities: each one's table in turn (the inverse's slot
            // may differ by entity: read where each row's entity keeps it).
            var targets: [Int64: StoreRow] = [:]
            var targetEntities: [Int64: EntityDescription] = [:]
            var remaining = Array(Set(wanted))
            for narrowed in r.concreteDestinations(in: store.schema) where !remaining.isEmpty {
                for row in try store.rows(of: narrowed.destination, keys: remaining) where targets[row.key] == nil {
                    targets[row.key] = row
                    targetEntities[row.key] = narrowed.destination
                }
                remaining.removeAll { targets[$0] != nil }
            }
            for owner in owners {
                let key = owner.key
                guard case .integer(let target) = owner.values[slot] else { continue }
                guard let row = targets[target] else {
                    found.append(VerificationFinding(kind: .danglingForeignKey, entity: source, property: name, object: uri(source, key),
                                                     message: "\(source) \(key)'s \(name) points at \(destination) \(target), which does not exist."))
                    continue
                }
                let slot = targetEntities[target].map { entity in entity === r.destination ? inverseSlot : inverseSlot.flatMap { _ in entity.storedValueIndex(ofRelationship: r.inverseIndex) } } ?? inverseSlot
                if let slot, row.values[slot] != .integer(key) {
                    let back = if case .integer(let k) = row.values[slot] { "\(source) \(k)" } else { "nil" }
                    found.append(VerificationFinding(kind: .inverseMismatch, entity: source, property: name, object: uri(source, key),
                                                     message: "\(source) \(key)'s \(name) is \(destination) \(target), whose \(inverse) is \(back), not \(source) \(key)."))
                }
            }
        }
        add(found.findings)
    }

    /// An ordered relationship's saved order is whole keys, each listed once.
    mutating func checkOrder(_ r: ResolvedRelationship) throws {
        guard let slot = r.source.storedValueIndex(ofRelationship: r.index) else { return }
        var found = Found(limit: limit)
        let uri = makesURIs
        try StoreRowPages.forEach(of: r.source, in: store) { owners in
            for owner in owners where owner.values[slot] != .null {
                found.append(VerificationRun.orderFinding(owner.values[slot], of: r, owner: owner.key, uri: uri(r.source.name, owner.key)))
            }
        }
        add(found.findings)
    }

    /// Every history transaction `fetchHistory` returns names only entities, keys and properties
    /// of the schema. One the store cannot read at all ends the check with what the store says.
    mutating func checkHistory() throws {
        var found = Found(limit: limit)
        var after: HistoryToken?
        let (store, schema) = (self.store, self.store.schema)
        while true {
            let descriptor = HistoryDescriptor(after: after, fetchLimit: StoreRowPages.size)
            let page: [HistoryTransaction]
            switch Result(catching: { () throws(LoomError) in try store.fetchHistory(descriptor) }) {
            case .success(let transactions):
                page = transactions
            case .failure(let error) where error.code == .corruptValue:
                found.append(VerificationFinding(kind: .malformedHistory, property: "loom_history", message: error.message))
                page = []
            case .failure(let error):
                throw error
            }
            for transaction in page {
                let label = "History transaction #\(transaction.token.transactionNumber)"
                for change in transaction.changes {
                    var properties: [String] = []
                    if case .update(let updated) = change.kind { properties = updated }
                    properties += change.tombstone?.values.keys.sorted() ?? []
                    let problem = VerificationRun.historyGroupProblem(
                        entityName: change.objectID.entityName, keys: [change.objectID.primaryKey], properties: properties, listed: nil, schema: schema)
                    if let problem {
                        found.append(VerificationRun.historyFinding(label, problem))
                        break
                    }
                }
            }
            guard page.count == StoreRowPages.size, let last = page.last else { break }
            after = last.token
        }
        add(found.findings)
    }

    /// No two objects share the values of a uniqueness constraint (NULLs never clash).
    /// A constraint declared on a parent: no value shared by objects of two of its members
    /// (within one member, ``checkUniqueness(_:_:)`` finds them).
    mutating func checkUniqueness(across constraint: HierarchyConstraint) throws {
        var byValues: [[StoredValue]: [(entity: String, key: Int64)]] = [:]
        for member in constraint.members {
            let slots = constraint.attributes.compactMap { member.storedValueIndex(named: $0) }
            guard slots.count == constraint.attributes.count else { continue }
            try StoreRowPages.forEach(of: member, in: store) { rows in
                for row in rows {
                    let values = slots.map { row.values[$0] }
                    if values.contains(.null) { continue }
                    byValues[values, default: []].append((member.name, row.key))
                }
            }
        }
        let list = constraint.attributes.joined(separator: ", ")
        var found: [VerificationFinding] = []
        for objects in byValues.values where Set(objects.map(\.entity)).count > 1 {
            let sorted = objects.sorted { ($0.entity, $0.key) < ($1.entity, $1.key) }
            found.append(VerificationFinding(
                kind: .uniquenessViolation, entity: sorted[0].entity, property: constraint.attributes.joined(separator: ","), object: uri(sorted[0].entity, sorted[0].key),
                message: "\(sorted.prefix(6).map { "\($0.entity) \($0.key)" }.joined(separator: " and ")) have the same \(list), which must be unique across \(constraint.owner.name)'s sub-entities."))
        }
        add(found.sorted { $0.message < $1.message })
    }

    mutating func checkUniqueness(_ entity: EntityDescription, _ constraint: [String]) throws {
        let slots = constraint.compactMap { entity.storedValueIndex(named: $0) }
        guard slots.count == constraint.count else { return }
        // Only the constraint's values and keys are held, not the rows.
        var byValues: [[StoredValue]: [Int64]] = [:]
        try StoreRowPages.forEach(of: entity, in: store) { rows in
            for row in rows {
                let values = slots.map { row.values[$0] }
                if values.contains(.null) { continue }
                byValues[values, default: []].append(row.key)
            }
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
