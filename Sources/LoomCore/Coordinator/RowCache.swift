import Foundation

/// A row of an entity: the key of the shared row cache, the identity map and the pending changes.
struct RowCacheKey: Hashable {
    let entity: ObjectIdentifier
    let key: Int64

    /// What `Dictionary` and `Set` call: ``IdentityHash`` of the key and the entity's address
    /// instead of SipHash over both. A context's pending
    /// changes, its strongly held objects and the shared row cache are all keyed this way, so
    /// every insert and every save hashes these several times.
    @inline(__always)
    func _rawHashValue(seed: Int) -> Int {
        let entityBits = UInt64(UInt(bitPattern: entity))
        return IdentityHash.mix(UInt64(bitPattern: key) ^ (entityBits &* 0x9E37_79B9_7F4A_7C15), seed: seed)
    }
}

extension StoreChangeSet.Update {
    /// The changed row, as the shared cache, the change log and pending changes key it.
    var rowKey: RowCacheKey { RowCacheKey(entity: ObjectIdentifier(entity), key: key) }
}

extension StoreChangeSet.Delete {
    /// The deleted row, as the shared cache, the change log and pending changes key it.
    var rowKey: RowCacheKey { RowCacheKey(entity: ObjectIdentifier(entity), key: key) }
}

struct RowCache {
    var rows: [RowCacheKey: (row: StoreRow, loadedAt: UInt64)] = [:]
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Caches a row, unless the cache already has a newer version of it. (A row that a save
    /// changed or deleted after the read that returned it never gets here: the coordinator
    /// checks its change log first, see `PersistentStoreCoordinator.cache(_:of:readAt:)`.)
    ///
    /// A full cache evicts an eighth of its rows (whichever come first in the table: random
    /// ones) rather than all of them, and hands them to ``takeEvicted()``, so that freeing them
    /// happens after the caller released the cache's lock: a reader waiting for the lock never
    /// waits for thousands of rows to be freed.
    mutating func insert(_ row: StoreRow, for key: RowCacheKey, at now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        if let cached = rows[key]?.row, cached.version > row.version { return }
        if rows.count >= limit, rows[key] == nil {
            for victim in Array(rows.keys.prefix(max(1, limit / 8))) {
                if let entry = rows.removeValue(forKey: victim) { evicted.append(entry.row) }
            }
        }
        rows[key] = (row, now)
    }

    /// Rows evicted since the last call, for the caller to free outside the lock.
    var evicted: [StoreRow] = []

    mutating func takeEvicted() -> [StoreRow] {
        if evicted.isEmpty { return [] }
        defer { evicted = [] }
        return evicted
    }

    /// Forgets the row of an object that was deleted.
    mutating func remove(deleted key: RowCacheKey) {
        if !rows.isEmpty { rows[key] = nil }
    }

    func row(for key: RowCacheKey, maximumAge: Double) -> StoreRow? {
        guard let entry = rows[key] else { return nil }
        if maximumAge >= 0 {
            let age = Double(DispatchTime.now().uptimeNanoseconds &- entry.loadedAt) / 1e9
            if age > maximumAge { return nil }
        }
        return entry.row
    }
}
