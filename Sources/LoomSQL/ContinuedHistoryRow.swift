package import Foundation
@_spi(LoomStore) package import LoomCore

/// The history row a SQL store wrote last in its open write transaction, and the change sets
/// that continue its history transaction (``StoreChangeSet/continuesHistoryTransaction``: a
/// batch request's later chunks).
///
/// The row is written (INSERT) when its first change set is applied, so its number is known
/// and commit order kept; the groups of the change sets that continue it are kept here, each
/// added in O(its changes), and merged once (``HistoryChangeGroup/merging(_:)``)
/// into the values written over the row before the transaction commits: a request of n chunks
/// reads nothing back and writes its history twice, not n times. The change set the row was
/// written from is kept as it is, and turned into groups only when a change set continues it.
///
/// A value: a store keeps it with its writer and restores an earlier one when a savepoint
/// rolls back (what was recorded under the savepoint is gone with it).
package struct ContinuedHistoryRow: Sendable {
    /// The row's history transaction number.
    package let number: Int64
    /// The change set the row was written from, until a change set continues it.
    private var written: StoreChangeSet?
    /// The groups of each change set of the transaction, in order, once one continued it.
    private var groups: [[HistoryChangeGroup]] = []

    /// The row `number`, just written from `changes`.
    package init(number: Int64, writtenFrom changes: StoreChangeSet) {
        self.number = number
        written = changes
    }

    /// Whether a change set continued the row since it was written: its values must be
    /// written again (``merged``).
    package var isContinued: Bool { written == nil }

    /// Adds the changes of `changes`, which continues the row's history transaction.
    ///
    /// - Complexity: O(changes), amortized (the row's own changes once, at the first).
    package mutating func `continue`(with changes: StoreChangeSet, in schema: Schema) {
        if let written {
            groups.append(HistoryChangeGroup.groups(of: written, in: schema))
            self.written = nil
        }
        groups.append(HistoryChangeGroup.groups(of: changes, in: schema))
    }

    /// The row's values once continued: its entity list (``SQLHistory/entityList(_:)``) and its
    /// packed changes, each object once.
    package var merged: (entities: String, changes: Data) {
        let merged = HistoryChangeGroup.merging(groups)
        return (SQLHistory.entityList(merged), HistoryChangeGroup.encode(merged))
    }
}
