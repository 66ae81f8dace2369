import Foundation
@_spi(LoomStore) import LoomCore
import LoomSQL
import GRDB

/// The history check: every history row that `fetchHistory` and `loom history` read (those
/// whose changes were not purged) reads back, as ``SQLHistory`` reads it, and names only what
/// the schema has (a migration drops the history before it, so every row is the schema's).
extension VerificationRun {
    mutating func checkHistory(_ db: Database) throws {
        guard try db.tableExists("loom_history") else { return }
        let query = """
            SELECT number, timestamp, author, context, process, processName, entities, changes FROM loom_history \
            WHERE changes IS NOT NULL ORDER BY number
            """
        let found = try select(db, query) { row in
            let number = row[0] as DatabaseValue
            let label = Int64.fromDatabaseValue(number).map { "History transaction #\($0)" } ?? "A history transaction without a whole number"
            guard let problem = historyProblem(row) else { return nil }
            return Self.historyFinding(label, problem)
        }
        add(found)
    }

    /// The finding for a history transaction (`label`, e.g. `History transaction #12`) that
    /// `problem`, the end of a sentence, describes. Shared by every store's check.
    static func historyFinding(_ label: String, _ problem: String) -> VerificationFinding {
        VerificationFinding(kind: .malformedHistory, property: "loom_history", message: "\(label) \(problem); loom history and fetchHistory fail on it.")
    }

    /// What one group of a history transaction's changes names that `schema` does not have,
    /// as the end of a sentence, or `nil`. `listed` is the transaction's entity list
    /// (`,Book,Tag,`), when the store keeps one apart from the changes. Shared by every store's
    /// check.
    static func historyGroupProblem(entityName: String, keys: [Int64], properties: [String], listed: String?, schema: Schema) -> String? {
        guard let entity = schema.entity(named: entityName) else {
            return "names the entity \(entityName), which the saved schema does not have"
        }
        if let listed, !listed.contains(",\(entityName),") {
            return "changes \(entityName) objects but its entity list does not name \(entityName), so filtering by entity misses it"
        }
        if let key = keys.first(where: { $0 < 1 }) { return "names \(entityName) \(key), a key below 1" }
        let known = Set(entity.attributes.map(\.name) + entity.relationships.map(\.name))
        if let unknown = properties.first(where: { !known.contains($0) }) {
            return "names the property \(unknown) of \(entityName), which the saved schema does not have"
        }
        return nil
    }

    /// What is wrong with one history row, as the end of a sentence; `nil` when it reads back.
    private func historyProblem(_ row: Row) -> String? {
        let values = (0..<8).map { row[$0] as DatabaseValue }
        func isText(_ value: DatabaseValue) -> Bool { if case .string = value.storage { true } else { false } }
        if Int64.fromDatabaseValue(values[0]) == nil { return "has a number that is not an integer" }
        if Double.fromDatabaseValue(values[1]) == nil { return "has a timestamp that is not a number" }
        for (i, name) in [(2, "author"), (3, "context")] where !values[i].isNull && !isText(values[i]) {
            return "has an \(name) that is neither text nor NULL"
        }
        if Int64.fromDatabaseValue(values[4]) == nil { return "has a process identifier that is not an integer" }
        if !isText(values[5]) { return "has a process name that is not text" }
        guard let changes = Data.fromDatabaseValue(values[7]) else { return "has changes that are not a blob" }
        // Bounded as the stores bound it: a damaged run of keys must not expand to billions.
        let keyLimit = SQLHistory.keyLimit(marks: keyMarks.map { Array($0.values) } ?? [])
        guard let groups = HistoryChangeGroup.decode(changes, keyLimit: keyLimit) else {
            return "has packed changes that cannot be read, or that list more than the \(keyLimit) changes the key allocator's marks allow"
        }
        let listed = String.fromDatabaseValue(values[6]) ?? ""
        for group in groups {
            let names = group.properties.isEmpty ? [] : group.properties.split(separator: ",").map(String.init)
            if let problem = Self.historyGroupProblem(entityName: group.entityName, keys: group.keys, properties: names, listed: listed, schema: schema) {
                return problem
            }
            if !group.tombstones.isEmpty, Set(names).count != names.count {
                return "lists an attribute of the tombstones of \(group.entityName) twice"
            }
        }
        return nil
    }
}
