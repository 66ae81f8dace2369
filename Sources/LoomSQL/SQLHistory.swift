package import Foundation
@_spi(LoomStore) package import LoomCore

/// The history table both SQL stores keep: one row per transaction with its number, time,
/// author, context, process, the entities it changed (`,Book,Tag,`, for filtering) and its
/// changes packed by ``HistoryChangeGroup/encode(_:)``. This turns one such row into a
/// ``HistoryTransaction``, the same way on every store.
package enum SQLHistory {
    /// The columns a store reads for ``transaction(number:timestamp:author:context:process:processName:changes:entityNames:store:location:)``, in its order.
    package static let columns = "number, timestamp, author, context, process, processName, changes"

    /// The statement that reads the key allocator's marks (each entity's next key), for
    /// ``keyLimit(marks:)``.
    package static let keyMarksQuery = "SELECT next FROM loom_keys"

    /// The most changes one history transaction of a store can list: every key its allocator
    /// handed out (the keys below each entity's mark, `marks` as ``keyMarksQuery`` reads them),
    /// three times (a transaction records an object once, but a damaged key list is not worth
    /// a false refusal). Saturates instead of overflowing on damaged marks.
    ///
    /// Read the marks after the history rows, or in the same snapshot: marks only grow, so
    /// every key a row read before them lists is below them.
    package static func keyLimit(marks: [Int64]) -> Int {
        var handedOut = 0
        for next in marks where next > 1 {
            let (sum, overflow) = handedOut.addingReportingOverflow(Int(next - 1))
            handedOut = overflow ? .max : sum
        }
        let (limit, overflow) = handedOut.multipliedReportingOverflow(by: 3)
        return overflow ? .max : limit
    }

    /// The transaction of one history row, with only the changes of `entityNames` (`nil`: all).
    /// `keyLimit` is the most changes it can list (``keyLimit(marks:)``): a damaged row that
    /// claims more is refused instead of expanded.
    ///
    /// - Throws: ``LoomError/Code/corruptValue`` when the packed changes cannot be read or list
    ///   more than `keyLimit` changes.
    package static func transaction(
        number: Int64, timestamp: Double, author: String?, context: String?, process: Int64, processName: String, changes: Data,
        entityNames wanted: Set<String>?, store identifier: UUID, location: String, keyLimit: Int
    ) throws(LoomError) -> HistoryTransaction {
        guard let groups = HistoryChangeGroup.decode(changes, keyLimit: keyLimit) else {
            throw LoomError(
                .corruptValue,
                "History transaction #\(number) of the store at \(location) cannot be read: its changes are damaged (they cannot be decoded, or list more than the \(keyLimit) changes the store's key allocator allows). Delete the history through it, or restore the store from a backup.",
                path: location)
        }
        var list: [HistoryChange] = []
        for group in groups where wanted?.contains(group.entityName) ?? true {
            let kind: HistoryChange.Kind = switch group.kind {
            case .insert: .insert
            case .update: .update(updatedProperties: group.properties.isEmpty ? [] : group.properties.split(separator: ",").map(String.init))
            case .delete: .delete
            }
            let names = group.tombstones.isEmpty ? [] : group.properties.split(separator: ",").map(String.init)
            for (i, key) in group.keys.enumerated() {
                let tombstone = i < group.tombstones.count ? HistoryTombstone(values: Dictionary(uniqueKeysWithValues: zip(names, group.tombstones[i]))) : nil
                list.append(HistoryChange(objectID: AnyObjectID(storeIdentifier: identifier, entityName: group.entityName, primaryKey: key), kind: kind, tombstone: tombstone))
            }
        }
        return HistoryTransaction(
            token: HistoryToken(storeIdentifier: identifier, transactionNumber: number, fingerprint: HistoryToken.fingerprint(ofTimestamp: timestamp)),
            timestamp: Date(timeIntervalSince1970: timestamp), author: author, contextName: context,
            processIdentifier: Int32(truncatingIfNeeded: process), processName: processName, changes: list)
    }

    /// A save's `entities` and `changes` values, as UTF-8 and bytes, written into buffers a
    /// store keeps from one save to the next (emptied first): what ``entityList(_:)`` and
    /// ``HistoryChangeGroup/encode(_:)`` make of the save's groups, without making the groups
    /// when the save only inserts objects of one entity (most saves).
    package static func rowValues(of changes: StoreChangeSet, in schema: Schema, entities: inout [UInt8], packed: inout [UInt8]) {
        entities.removeAll(keepingCapacity: true)
        packed.removeAll(keepingCapacity: true)
        if let entity = HistoryChangeGroup.onlyInsertedEntity(of: changes) {
            entities.append(UInt8(ascii: ","))
            entities.append(contentsOf: entity.name.utf8)
            entities.append(UInt8(ascii: ","))
            HistoryChangeGroup.encodeInserts(of: changes, entity: entity, into: &packed)
            return
        }
        let groups = HistoryChangeGroup.groups(of: changes, in: schema)
        entities.append(contentsOf: entityList(groups).utf8)
        HistoryChangeGroup.encode(groups, into: &packed)
    }

    /// The entities a change set's history row lists, `,A,B,` (each name once, in order).
    package static func entityList(_ groups: [HistoryChangeGroup]) -> String {
        var list = ","
        var listed: [String] = []
        for group in groups where !listed.contains(group.entityName) {
            listed.append(group.entityName)
            list += group.entityName
            list += ","
        }
        return listed.isEmpty ? ",," : list
    }
}

/// How a store's watcher of other instances' commits orders them among its own: history rows
/// carry the instance that committed them (`origin`) and its commit sequence; each foreign
/// transaction is handed on with the last local commit before it, so that the coordinator
/// delivers it after that save.
package struct HistoryOrigins: Sendable {
    /// This instance's `origin`.
    package let mine: Int64
    /// The last commit of this instance found in the history so far.
    package private(set) var lastLocalCommit: UInt64 = 0

    package init(mine: Int64) { self.mine = mine }

    /// The rows other instances committed, each with the last local commit before it, from
    /// `(number, origin, commit)` rows in number order. Call ``advance(over:)`` once they are
    /// handed on.
    package func foreign(_ rows: [(number: Int64, origin: Int64?, commit: Int64?)]) -> (rows: [(number: Int64, after: UInt64)], localCommit: UInt64) {
        var foreign: [(number: Int64, after: UInt64)] = []
        var localCommit = lastLocalCommit
        for row in rows {
            if row.origin == mine {
                localCommit = UInt64(max(0, row.commit ?? 0))
            } else {
                foreign.append((row.number, localCommit))
            }
        }
        return (foreign, localCommit)
    }

    /// The transactions read for `foreign` rows, each with the local commit it follows.
    package func ordered(_ transactions: [HistoryTransaction], foreign: [(number: Int64, after: UInt64)], localCommit: UInt64) -> [(transaction: HistoryTransaction, afterLocalCommit: UInt64)] {
        let after = Dictionary(uniqueKeysWithValues: foreign.map { ($0.number, $0.after) })
        return transactions.map { (transaction: $0, afterLocalCommit: after[$0.token.transactionNumber] ?? localCommit) }
    }

    /// Records that everything up to `localCommit` was seen.
    package mutating func advance(to localCommit: UInt64) { lastLocalCommit = localCommit }
}
