/// Reading and deleting the store's history (SwiftData's `fetchHistory` / `deleteHistory`).
extension ManagedObjectContext {
    /// The store's committed transactions that `descriptor` selects, oldest first. Call on the
    /// context's isolation; it reads the store (not this context's unsaved changes).
    ///
    /// ```swift
    /// let transactions = try context.fetchHistory(HistoryDescriptor(after: lastToken))
    /// for transaction in transactions where transaction.author != "me" { … }
    /// lastToken = transactions.last?.token ?? lastToken
    /// ```
    ///
    /// The in-memory store keeps no history: it returns nothing.
    ///
    /// - Throws: ``LoomError/Code/historyTokenExpired`` when `descriptor.after` names deleted
    ///   history (never a silent replay or a skip), ``LoomError/Code/historyTokenForeignStore``
    ///   when it belongs to another store, ``LoomError/Code/historyTokenAhead`` when it is past
    ///   the store's last transaction and ``LoomError/Code/historyTokenMismatch`` when the store
    ///   gave its number to another transaction (both: the store was restored from an older
    ///   copy; refresh, re-sync and start again from ``currentHistoryToken()``),
    ///   ``LoomError/Code/invalidRequest`` for a negative token or limit,
    ///   ``LoomError/Code/storeFailure``.
    public func fetchHistory(_ descriptor: HistoryDescriptor) throws(LoomError) -> [HistoryTransaction] {
        ConcurrencyDebugging.check(self, #function)
        return try coordinator.store.fetchHistory(descriptor)
    }

    /// Deletes the history up to and including `token`'s transaction, in short write
    /// transactions. Delete only what every consumer has read: a consumer whose token is older
    /// then gets ``LoomError/Code/historyTokenExpired``. Call on the context's isolation.
    ///
    /// - Throws: ``LoomError/Code/historyTokenAhead`` or ``LoomError/Code/historyTokenMismatch``
    ///   (deleting nothing) for a token this store's history does not hold, as
    ///   ``fetchHistory(_:)`` does; ``LoomError/Code/historyTokenForeignStore``,
    ///   ``LoomError/Code/invalidRequest``, ``LoomError/Code/storeFailure``.
    public func deleteHistory(through token: HistoryToken) throws(LoomError) {
        ConcurrencyDebugging.check(self, #function)
        try coordinator.store.deleteHistory(through: token)
    }

    /// The token of the store's last committed transaction: where a new consumer starts
    /// (`nil` before the first save, and for the in-memory store).
    public func currentHistoryToken() throws(LoomError) -> HistoryToken? {
        ConcurrencyDebugging.check(self, #function)
        return try coordinator.store.currentHistoryToken()
    }
}
