import Synchronization

/// This instance's commits whose outcome it never learned (`LoomError/Code/commitOutcomeUnknown`:
/// the connection was lost after `COMMIT` was sent), for the listener: such a commit, if the
/// server did make it, was never announced to the instance's own contexts, so the listener
/// hands its history rows on as if another instance had made them, once.
///
/// A row is told from the instance's other rows by its commit number (the number the instance's
/// next commit takes too, since an unknown commit takes none) and the exact timestamp the store
/// bound into it. An entry is dropped once the listener finds its rows, or finds a later row of
/// the instance: rows are numbered in commit order under the store's commit lock, which the
/// unknown commit held until it ended, so a later row means it ended without one.
///
/// `Sendable`: the entries are behind a mutex; used by the saving thread and the listener's.
final class UnacknowledgedCommits: Sendable {
    /// At most this many are kept (each is a few words): the oldest go first.
    static let limit = 1_000

    private let entries = Mutex<[(commit: Int64, timestamps: Set<Double>)]>([])
    /// The timestamps of the history rows the open transaction (or one-statement save) wrote.
    private let written = Mutex<[Double]>([])

    /// A new transaction (or one-statement save) begins: no history row written yet.
    func beginTransaction() {
        written.withLock { $0.removeAll() }
    }

    /// The open transaction wrote a history row with `timestamp`.
    func wroteHistoryRow(timestamp: Double) {
        written.withLock { $0.append(timestamp) }
    }

    /// The open transaction, numbered `commit`, ended with its outcome unknown.
    func outcomeUnknown(commit: UInt64) {
        let timestamps = written.withLock { written in
            defer { written.removeAll() }
            return Set(written)
        }
        guard !timestamps.isEmpty else { return }
        entries.withLock { entries in
            entries.append((Int64(commit), timestamps))
            if entries.count > Self.limit { entries.removeFirst(entries.count - Self.limit) }
        }
    }

    /// Whether any entry waits (the listener's fast path).
    var isEmpty: Bool { entries.withLock { $0.isEmpty } }

    /// The rows, among `rows` (number order; `timestamp` each), that the instance (`mine`)
    /// committed without learning it: their numbers. Entries whose rows were found, or that a
    /// later row of the instance shows ended without a row, are dropped.
    func adopt(_ rows: [(number: Int64, origin: Int64?, commit: Int64?, timestamp: Double?)], mine: Int64) -> Set<Int64> {
        entries.withLock { entries in
            guard !entries.isEmpty else { return [] }
            var adopted: Set<Int64> = []
            // The timestamps of the rows found (a transaction's rows are all found in one read).
            var found: Set<Double> = []
            var lastOwnCommit: Int64?
            for row in rows where row.origin == mine {
                guard let commit = row.commit else { continue }
                if let timestamp = row.timestamp, entries.contains(where: { $0.commit == commit && $0.timestamps.contains(timestamp) }) {
                    adopted.insert(row.number)
                    found.insert(timestamp)
                } else {
                    lastOwnCommit = max(lastOwnCommit ?? commit, commit)
                }
            }
            entries.removeAll { entry in
                !entry.timestamps.isDisjoint(with: found) || lastOwnCommit.map { entry.commit <= $0 } == true
            }
            return adopted
        }
    }
}
