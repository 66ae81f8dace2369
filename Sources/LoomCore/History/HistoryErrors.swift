public import Foundation

/// The history errors every store throws alike.
@_spi(LoomStore) public enum HistoryErrors {
    /// Refuses a history request every store refuses alike: a token of another store, a
    /// negative limit.
    public static func check(_ descriptor: HistoryDescriptor, store: UUID) throws(LoomError) {
        if let after = descriptor.after, after.storeIdentifier != store { throw foreign(after, store: store) }
        if let limit = descriptor.fetchLimit, limit < 0 {
            throw LoomError(.invalidRequest, "A history fetch limit cannot be negative (it is \(limit)).")
        }
    }

    public static func foreign(_ token: HistoryToken, store: UUID) -> LoomError {
        LoomError(
            .historyTokenForeignStore,
            "The history token \(token) belongs to the store \(token.storeIdentifier.uuidString), not to this one (\(store.uuidString)): the store was replaced or the token saved for another. Refresh everything (refreshAllObjects()) and start again from currentHistoryToken().")
    }

    /// Checks where `token` stands in a store's history before the store reads after it
    /// (`forDeletion` false) or deletes through it (true): a negative number is an invalid
    /// request; a number past the store's last transaction (`lastNumber`, `nil` when there is
    /// none), or a transaction the store recorded with another fingerprint (`recordedTimestamp`:
    /// the commit time of the store's transaction with the token's number, `nil` when it was
    /// deleted), means the store is not the one the token was read from (restored from an older
    /// copy); reading after a number the history was deleted through (`deletedThrough`) would
    /// skip changes. `oldestKept` is asked only for that last error.
    public static func checkPosition(
        _ token: HistoryToken, lastNumber: Int64?, deletedThrough: Int64, recordedTimestamp: Double?,
        forDeletion: Bool = false, oldestKept: () throws -> Int64?
    ) throws {
        let number = token.transactionNumber
        if number < 0 {
            throw LoomError(.invalidRequest, "The history token \(token) has a negative transaction number: a store numbers its transactions from 1 (0 is before the first). Use a token the store gave (a transaction's token, or currentHistoryToken()).")
        }
        let last = lastNumber ?? 0
        if number > last { throw ahead(token, last: last) }
        if !forDeletion, number < deletedThrough {
            throw expired(token, oldest: try oldestKept().map { HistoryToken(storeIdentifier: token.storeIdentifier, transactionNumber: $0) })
        }
        if let expected = token.fingerprint, let recordedTimestamp, let recorded = HistoryToken.fingerprint(ofTimestamp: recordedTimestamp), recorded != expected {
            throw mismatch(token)
        }
    }

    /// A token past the store's last transaction (`last`, 0 when there is none).
    public static func ahead(_ token: HistoryToken, last: Int64) -> LoomError {
        LoomError(
            .historyTokenAhead,
            "The history token \(token) names transaction #\(token.transactionNumber), but this store's last transaction is \(last == 0 ? "none (it has no history)" : "#\(last)"): the store was restored from an older copy, or the token was read from another copy of it. The changes the token counts as read are not in this store. Refresh everything (refreshAllObjects()), re-sync what was derived from the store, and start again from currentHistoryToken().")
    }

    /// A token whose transaction number this store gave to another transaction.
    public static func mismatch(_ token: HistoryToken) -> LoomError {
        LoomError(
            .historyTokenMismatch,
            "The history token \(token) names transaction #\(token.transactionNumber), and this store's transaction #\(token.transactionNumber) is another one (its fingerprint differs): the store was restored from an older copy and has committed other transactions since, so the transactions up to the token are not the ones the token counts as read. Refresh everything (refreshAllObjects()), re-sync what was derived from the store, and start again from currentHistoryToken().")
    }

    public static func expired(_ token: HistoryToken, oldest: HistoryToken?) -> LoomError {
        LoomError(
            .historyTokenExpired,
            "The history after \(token) was partly deleted (purged, or ended by a migration to another model version): the oldest transaction kept is \(oldest.map { "#\($0.transactionNumber)" } ?? "none"), so the changes between them are gone. Refresh everything (refreshAllObjects()) and start again from currentHistoryToken().")
    }
}
