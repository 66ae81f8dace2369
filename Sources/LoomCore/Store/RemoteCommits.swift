/// Commits made by other store instances on the same storage, as a store's watcher finds them.
@_spi(LoomStore) public enum RemoteCommits: Sendable {
    /// Transactions, in commit order, each with the last commit made through this store
    /// instance before it (its ``CommitReceipt/sequence``; 0 if none), so that the coordinator
    /// delivers it after that commit's save.
    case committed([(transaction: HistoryTransaction, afterLocalCommit: UInt64)])
    /// The history after `after` was deleted before the watcher read it: what those commits
    /// changed is unknown. `current` is the last transaction now.
    case historyLost(after: HistoryToken, current: HistoryToken?)
    /// Watching could not start (the history could not be read, or the watcher's connection
    /// could not be opened): no other coordinator's commit will be reported.
    case unavailable(LoomError)
}
