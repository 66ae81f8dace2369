public import Foundation
import Synchronization

/// The one object all contexts of a container share: it owns the store, hands out primary
/// keys, serializes saves, and keeps a cache of row snapshots that every context fills faults
/// from.
///
/// `Sendable` and safe to use from any thread; contexts call it synchronously.
public final class PersistentStoreCoordinator: Sendable {
    /// The model.
    public let schema: Schema
    /// The store all objects live in.
    public let store: any PersistentStore
    /// The store's identifier, as carried by object IDs.
    public let storeIdentifier: UUID
    /// The same UUID, boxed once and shared by every object of this store.
    let identity: StoreIdentity

    private let rowCache: Locked<RowCache>
    /// Key blocks by entity, and the keys handed out and not saved yet: one lock for both, so
    /// that inserting an object takes it once.
    private struct Keys {
        var blocks: [ObjectIdentifier: KeyBlock] = [:]
        var unsaved: Set<RowCacheKey> = []
    }
    private let keys = Locked(Keys())
    /// Puts saves in commit order on their way to other contexts.
    private let sequencer: SaveSequencer
    /// The exclusive write running now, if any: the thread running it and the saves it made,
    /// which are delivered when it commits (and dropped if it rolls back).
    private let exclusiveWrite = Locked<ExclusiveWrite?>(nil)
    /// Where key blocks are reserved ahead (see ``allocateKey(for:)``): off every context's
    /// isolation, one reservation at a time.
    private let keyQueue = DispatchQueue(label: "Loom key reservations", qos: .utility)
    private let inboxes = Locked<[ObjectIdentifier: MergeInbox]>([:])

    struct ExclusiveWrite {
        let thread: UInt
        /// Whether saves made inside are delivered when it commits (an exclusive write block),
        /// rather than by their savers (a save's own conflict resolution).
        let holdsEvents: Bool
        var events: [SaveEvent] = []
        var applied = false
    }
    /// Bumped by every save that changes or deletes rows; read without a lock by faults that
    /// hold their fetched rows, to know whether those may have changed since.
    private let changeGeneration = Atomic<UInt64>(0)
    /// The generation at which each changed or deleted row last changed.
    private let changeLog = Locked(ChangeLog())

    struct ChangeLog {
        var changedAt: [RowCacheKey: UInt64] = [:]
        /// Changes before this generation were forgotten (the log is bounded).
        var forgottenBefore: UInt64 = 0
        static let limit = 100_000
    }

    struct KeyBlock {
        var next: Int64
        var end: Int64
        var size: Int
        /// The next block, reserved ahead in the background; used when this one runs out.
        var spare: Range<Int64>?
        /// Whether a reservation ahead is under way.
        var isReserving = false

        /// Moves to the spare block when this one is used up.
        mutating func advanceIfNeeded() {
            if next >= end, let spare {
                next = spare.lowerBound
                end = spare.upperBound
                self.spare = nil
            }
        }

        /// Takes in a range reserved from the store: as the current block if this one is used
        /// up, else as the spare. A range not needed (a reservation ahead and a synchronous one
        /// that crossed) is left unused: keys are never reused, gaps are harmless.
        mutating func take(_ range: Range<Int64>) {
            advanceIfNeeded()
            if next >= end {
                next = range.lowerBound
                end = range.upperBound
            } else if spare == nil {
                spare = range
            }
        }
    }

    /// Creates a coordinator for an open store.
    ///
    /// - Parameter rowCacheLimit: how many row snapshots the shared cache keeps at most.
    public init(store: any PersistentStore, rowCacheLimit: Int = 200_000) {
        self.store = store
        self.schema = store.schema
        self.storeIdentifier = store.identifier
        self.identity = StoreIdentity(uuid: store.identifier)
        self.rowCache = Locked(RowCache(limit: rowCacheLimit))
        self.sequencer = SaveSequencer(after: store.lastCommitSequence)
    }

    // MARK: Reading

    func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        let rows = try store.fetch(query)
        try validate(rows, of: query.entity)
        return rows
    }

    /// ``fetch(_:)``, where rows `isKnown` accepts come back without values (see
    /// ``PersistentStore/fetch(_:skippingValuesOf:)``); the others are validated as usual. The
    /// caller checks that the rows without values are exactly those it accepted.
    func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        let rows = try store.fetch(query, skippingValuesOf: isKnown)
        try validate(rows, of: query.entity, allowingValuesLeftOut: true)
        return rows
    }

    func count(_ query: StoreQuery) throws(LoomError) -> Int {
        try store.count(query)
    }

    /// The current row for a key: from the shared cache when there (and not older than
    /// `maximumAge` seconds, when one is given), else from the store.
    func row(of entity: EntityDescription, key: Int64, bypassingCache: Bool = false, maximumAge: Double = -1) throws(LoomError) -> StoreRow? {
        let cacheKey = RowCacheKey(entity: ObjectIdentifier(entity), key: key)
        if !bypassingCache, let cached = rowCache.withLock({ $0.row(for: cacheKey, maximumAge: maximumAge) }) { return cached }
        let rows = try store.rows(of: entity, keys: [key])
        try validate(rows, of: entity)
        guard let row = rows.first else { return nil }
        // A fresh read (an ID lookup) loads its object at once: no fault needs the row later.
        if bypassingCache { return row }
        let evicted = rowCache.withLock { cache in
            cache.insert(row, for: cacheKey)
            return cache.takeEvicted()
        }
        withExtendedLifetime(evicted) {}   // freed here, after the lock is released
        return row
    }

    /// The row the shared cache holds for a key, if any. No I/O.
    func cachedRow(of entity: EntityDescription, key: Int64) -> StoreRow? {
        rowCache.withLock { $0.row(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key), maximumAge: -1) }
    }

    /// The rows with these keys, read from the store in one query and put in the shared cache.
    func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        if keys.isEmpty { return [] }
        let rows = try store.rows(of: entity, keys: keys)
        try validate(rows, of: entity)
        cache(rows, of: entity)
        return rows
    }

    /// The rows a to-many relationship leads to for each of `keys` (one store query), put in
    /// the shared cache so that faults over them fire without I/O.
    func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        let related = try store.fetchRelated(relationship, keys: keys)
        try validate(related.map(\.row), of: relationship.destination)
        return related
    }

    /// Puts fetched rows in the shared cache, so that faults over them fire without I/O.
    func cache(_ rows: [StoreRow], of entity: EntityDescription) {
        let id = ObjectIdentifier(entity)
        let now = DispatchTime.now().uptimeNanoseconds
        let evicted = rowCache.withLock { cache in
            for row in rows { cache.insert(row, for: RowCacheKey(entity: id, key: row.key), at: now) }
            return cache.takeEvicted()
        }
        withExtendedLifetime(evicted) {}   // freed here, after the lock is released
    }

    private func validate(_ rows: [StoreRow], of entity: EntityDescription, allowingValuesLeftOut: Bool = false) throws(LoomError) {
        let attributes = entity.attributes
        let kinds = entity.attributeKinds
        for row in rows {
            if allowingValuesLeftOut && row.values.isEmpty { continue }
            guard row.values.count == entity.storedValueCount else {
                throw LoomError(.corruptValue, "The store returned \(row.values.count) values for \(entity.name)/\(row.key), which has \(entity.storedValueCount).", entity: entity.name)
            }
            for slot in attributes.count..<entity.storedValueCount where !entity.slotAccepts(slot, row.values[slot]) {
                throw LoomError(
                    .corruptValue,
                    "\(entity.name)/\(row.key).\(entity.storedValueName(at: slot)) holds a stored \(row.values[slot].kindName), which is not a valid reference; the row was changed outside Loom.",
                    entity: entity.name, attributes: [entity.storedValueName(at: slot)],
                    objectID: AnyObjectID(storeIdentifier: storeIdentifier, entityName: entity.name, primaryKey: row.key))
            }
            for i in kinds.indices {
                let value = row.values[i]
                if !kinds[i].type.accepts(value) || (value.isNull && !kinds[i].isOptional) {
                    let attribute = attributes[i]
                    throw LoomError(
                        .corruptValue,
                        "\(entity.name)/\(row.key).\(attribute.name) holds a stored \(value.kindName), which is not a valid \(attribute.isOptional ? "optional " : "")\(attribute.type.rawValue); the row was changed outside Loom.",
                        entity: entity.name, attributes: [attribute.name],
                        objectID: AnyObjectID(storeIdentifier: storeIdentifier, entityName: entity.name, primaryKey: row.key))
                }
            }
        }
    }

    // MARK: Keys

    /// A new, permanent primary key for an object of `entity`, noted as unsaved (see
    /// ``isUnsaved(_:key:)``) until a save inserts it or ``forgetUnsaved(_:key:)``.
    ///
    /// Keys are reserved from the store in blocks that grow with use (64 keys first, up to
    /// 8,192), and the next block is reserved *ahead*, in the background on a queue of the
    /// coordinator's own, when half of the current one is used: a caller on the main actor
    /// almost never waits for the store's writer. Only when both blocks are used up (the first
    /// insert of an entity, or a burst of inserts faster than the store) does this call reserve
    /// synchronously, and only then can it throw the store's error (``LoomError/Code/closed``
    /// after the store was closed). A reservation ahead that fails is not reported: the next
    /// synchronous one reports the store's error.
    func allocateKey(for entity: EntityDescription) throws(LoomError) -> Int64 {
        let id = ObjectIdentifier(entity)
        let (key, ahead) = keys.withLock { keys -> (Int64?, Int?) in
            guard var block = keys.blocks[id] else { return (nil, nil) }
            block.advanceIfNeeded()
            guard block.next < block.end else { return (nil, nil) }
            let key = block.next
            block.next += 1
            var ahead: Int?
            if block.spare == nil, !block.isReserving, block.end - block.next <= Int64(block.size / 2) {
                block.isReserving = true
                block.size = min(block.size * 2, 8192)
                ahead = block.size
            }
            keys.blocks[id] = block
            keys.unsaved.insert(RowCacheKey(entity: id, key: key))
            return (key, ahead)
        }
        if let ahead { reserveKeysAhead(for: entity, count: ahead) }
        if let key { return key }
        let size = keys.withLock { min(($0.blocks[id]?.size ?? 32) * 2, 8192) }
        let range = try store.allocateKeys(for: entity, count: size)
        return keys.withLock { keys in
            var block = keys.blocks[id] ?? KeyBlock(next: 0, end: 0, size: size)
            block.size = max(block.size, size)
            block.take(range)
            let key = block.next
            block.next += 1
            keys.blocks[id] = block
            keys.unsaved.insert(RowCacheKey(entity: id, key: key))
            return key
        }
    }

    /// Reserves the next block of keys for `entity` on the key queue, without waiting.
    private func reserveKeysAhead(for entity: EntityDescription, count: Int) {
        keyQueue.async { [weak self] in
            guard let self else { return }
            let id = ObjectIdentifier(entity)
            let range: Range<Int64>?
            do {
                range = try store.allocateKeys(for: entity, count: count)
            } catch {
                // Deliberately not reported here (no caller waits for it): the insert that
                // finds the blocks used up reserves synchronously and reports the error.
                range = nil
            }
            keys.withLock { keys in
                guard var block = keys.blocks[id] else { return }
                block.isReserving = false
                if let range { block.take(range) }
                keys.blocks[id] = block
            }
        }
    }

    func noteUnsaved(_ entity: EntityDescription, key: Int64) {
        _ = keys.withLock { $0.unsaved.insert(RowCacheKey(entity: ObjectIdentifier(entity), key: key)) }
    }

    func forgetUnsaved(_ entity: EntityDescription, key: Int64) {
        _ = keys.withLock { $0.unsaved.remove(RowCacheKey(entity: ObjectIdentifier(entity), key: key)) }
    }

    func isUnsaved(_ entity: EntityDescription, key: Int64) -> Bool {
        keys.withLock { $0.unsaved.contains(RowCacheKey(entity: ObjectIdentifier(entity), key: key)) }
    }

    // MARK: Writing

    /// Applies a change set in one store transaction and updates the shared cache. Returns the
    /// commit's receipt: the caller must then ``publish(_:for:)`` the save, once, whatever
    /// happens, so that later saves are not held back.
    ///
    /// Takes no lock of the coordinator's: the store serializes writes. A refused change set
    /// throws the store's error, with the conflicts it found (``LoomError/storeConflicts``).
    func save(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        let receipt = try store.apply(changes)
        exclusiveWrite.withLock { write in
            if write?.thread == ThreadID.current { write!.applied = true }
        }
        didApply(changes)
        return receipt
    }

    /// Hands a committed save (`event`, or nothing when no one needs its contents) to every
    /// other context for merging, in commit order; see ``SaveSequencer``. A save made inside an
    /// exclusive write is held until that write commits. Never waits for the contexts.
    func publish(_ event: SaveEvent?, for receipt: CommitReceipt) {
        let heldBack = exclusiveWrite.withLock { write -> Bool in
            guard write?.thread == ThreadID.current, write!.holdsEvents else { return false }
            if let event { write!.events.append(event) }
            return true
        }
        if heldBack { return }
        deliver(event.map { [$0] } ?? [], sequence: receipt.sequence)
    }

    private func deliver(_ events: [SaveEvent], sequence: UInt64) {
        sequencer.publish(events, sequence: sequence) { ready in
            let targets = inboxes.withLock { Array($0.values) }
            for event in ready {
                for inbox in targets { inbox.deliver(event) }
            }
        }
    }

    /// Runs `body` inside one store write transaction (``PersistentStore/withWriteTransaction(_:)``):
    /// no other coordinator or process can commit between what `body` reads and what it saves,
    /// and what it reads through this coordinator on this thread sees what it saved. The saves
    /// made in `body` reach other contexts when the transaction commits, in commit order; if
    /// `body` throws, nothing of it is written or delivered, and its error is rethrown unchanged.
    ///
    /// Holds no lock of the coordinator's while `body` runs: other contexts keep reading, and
    /// their saves wait for the store's writer.
    func performExclusiveWrite<T>(_ body: () throws -> T) throws -> T {
        let outcome = try withWriteTransaction(holdingEvents: true, body)
        deliver(outcome.events.map { var event = $0; event.number = outcome.receipt.sequence; return event }, sequence: outcome.receipt.sequence)
        return outcome.value
    }

    /// Runs `body` inside one store write transaction, for a save's last tries at resolving its
    /// conflicts: the save made inside publishes itself, with the returned receipt.
    func inWriteTransaction<T>(_ body: () throws(LoomError) -> T) throws(LoomError) -> (value: T, receipt: CommitReceipt) {
        do {
            let outcome = try withWriteTransaction(holdingEvents: false) { () throws -> T in try body() }
            return (outcome.value, outcome.receipt)
        } catch let error as LoomError {
            throw error
        } catch {
            throw LoomError(.storeFailure, "The store's write transaction failed.", underlying: error)
        }
    }

    /// Runs `body` in a store write transaction, noting (in ``exclusiveWrite``, cleared before
    /// the transaction ends, so that the next one starts clean) the thread and what its saves
    /// did. Returns the events the saves inside held back, to deliver once committed.
    private func withWriteTransaction<T>(holdingEvents: Bool, _ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt, events: [SaveEvent]) {
        var finished = ExclusiveWrite(thread: 0, holdsEvents: holdingEvents)
        do {
            let outcome = try store.withWriteTransaction { () throws -> T in
                exclusiveWrite.withLock { $0 = ExclusiveWrite(thread: ThreadID.current, holdsEvents: holdingEvents) }
                defer { finished = exclusiveWrite.withLock { write in defer { write = nil }; return write! } }
                return try body()
            }
            return (outcome.value, outcome.receipt, finished.events)
        } catch {
            if finished.applied {
                // What the rolled-back saves put in the shared cache never was: forget it all.
                forgetCachedRows()
            }
            // Key blocks reserved inside the transaction were rolled back with it: the store
            // may hand those keys out again, so this coordinator must not. (Keys are never
            // reused, so dropping blocks reserved outside it only leaves gaps.)
            keys.withLock { $0.blocks = [:] }
            throw error
        }
    }

    /// Empties the shared cache and marks every row as possibly changed.
    private func forgetCachedRows() {
        let generation = changeGeneration.load(ordering: .relaxed) + 1
        changeLog.withLock { log in
            log.changedAt.removeAll()
            log.forgottenBefore = generation
        }
        changeGeneration.store(generation, ordering: .releasing)
        let dropped = rowCache.withLock { cache -> RowCache in
            defer { cache = RowCache(limit: cache.limit) }
            return cache
        }
        withExtendedLifetime(dropped) {}   // freed here, after the lock is released
    }

    /// Updates the shared cache after a save: changed rows are updated (or dropped), deleted
    /// ones forgotten. New rows are not added: the saving context holds their objects, the
    /// save event carries them to the contexts that merge, and a bulk import would otherwise
    /// churn the cache (and its lock) for rows nobody has asked for.
    private func didApply(_ changes: StoreChangeSet) {
        if !changes.updates.isEmpty || !changes.deletes.isEmpty {
            let generation = changeGeneration.load(ordering: .relaxed) + 1
            changeLog.withLock { log in
                if log.changedAt.count + changes.updates.count + changes.deletes.count > ChangeLog.limit {
                    log.changedAt.removeAll()
                    log.forgottenBefore = generation
                }
                for update in changes.updates { log.changedAt[RowCacheKey(entity: ObjectIdentifier(update.entity), key: update.key)] = generation }
                for delete in changes.deletes { log.changedAt[RowCacheKey(entity: ObjectIdentifier(delete.entity), key: delete.key)] = generation }
            }
            changeGeneration.store(generation, ordering: .releasing)
        }
        let evicted = rowCache.withLock { cache in
            for update in changes.updates {
                let key = RowCacheKey(entity: ObjectIdentifier(update.entity), key: update.key)
                if var row = cache.rows[key]?.row, row.version == update.expectedVersion {
                    for change in update.changes { row.values[change.index] = change.value }
                    row.version += 1
                    cache.insert(row, for: key)
                } else {
                    cache.rows[key] = nil
                }
            }
            for delete in changes.deletes {
                cache.remove(deleted: RowCacheKey(entity: ObjectIdentifier(delete.entity), key: delete.key))
            }
            return cache.takeEvicted()
        }
        withExtendedLifetime(evicted) {}   // freed here, after the lock is released
        keys.withLock { keys in
            for insert in changes.inserts { keys.unsaved.remove(RowCacheKey(entity: ObjectIdentifier(insert.entity), key: insert.key)) }
        }
    }

    // MARK: Merging

    func register(_ inbox: MergeInbox) {
        inboxes.withLock { $0[ObjectIdentifier(inbox)] = inbox }
    }

    /// The current change generation (see `didApply`).
    var currentGeneration: UInt64 { changeGeneration.load(ordering: .acquiring) }

    /// Whether the row `key` may have changed or been deleted by a save after `generation`.
    func mayHaveChanged(_ key: RowCacheKey, since generation: UInt64) -> Bool {
        if currentGeneration == generation { return false }
        return changeLog.withLock { log in
            generation < log.forgottenBefore || (log.changedAt[key] ?? 0) > generation
        }
    }

    /// Whether any context other than the one owning `inbox` may receive saves.
    func hasInboxes(besides inbox: MergeInbox) -> Bool {
        inboxes.withLock { $0.count > ($0[ObjectIdentifier(inbox)] == nil ? 0 : 1) }
    }

    func unregister(_ inbox: MergeInbox) {
        _ = inboxes.withLock { $0.removeValue(forKey: ObjectIdentifier(inbox)) }
    }

    // MARK: IDs

    /// Turns a URI made by ``AnyObjectID/uriRepresentation`` back into an ID of this store.
    ///
    /// Throws ``LoomError/Code/malformedURI`` for a URI that is not a Loom object URI,
    /// ``LoomError/Code/foreignObjectID`` for another store's URI, and
    /// ``LoomError/Code/unknownEntity`` for an entity this model lacks.
    public func objectID(forURIRepresentation uri: URL) throws(LoomError) -> AnyObjectID {
        let id = try AnyObjectID(uriRepresentation: uri)
        try checkOwnership(of: id)
        return id
    }

    @discardableResult
    func checkOwnership(of id: AnyObjectID) throws(LoomError) -> EntityDescription {
        guard id.storeIdentifier == storeIdentifier else {
            throw LoomError(.foreignObjectID, "\(id) belongs to store \(id.storeIdentifier.uuidString), not to this container's store \(storeIdentifier.uuidString).", entity: id.entityName, objectID: id)
        }
        return try schema.requireEntity(named: id.entityName)
    }
}

/// A store's UUID in a shared box, so that every object can name its store with one reference.
final class StoreIdentity: Sendable {
    let uuid: UUID
    init(uuid: UUID) { self.uuid = uuid }
}

struct RowCacheKey: Hashable {
    let entity: ObjectIdentifier
    let key: Int64
}

struct RowCache {
    var rows: [RowCacheKey: (row: StoreRow, loadedAt: UInt64)] = [:]
    /// Keys of rows deleted by a save through this coordinator (keys are never reused).
    var deleted: Set<RowCacheKey> = []
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Caches a row, unless the cache already has a newer version of it or knows it was
    /// deleted: a fetch that read the store before another context's save may hand its rows in
    /// after that save updated the cache, and must not put the older row back.
    ///
    /// A full cache evicts an eighth of its rows (whichever come first in the table: random
    /// ones) rather than all of them, and hands them to ``takeEvicted()``, so that freeing them
    /// happens after the caller released the cache's lock: a reader waiting for the lock never
    /// waits for thousands of rows to be freed.
    mutating func insert(_ row: StoreRow, for key: RowCacheKey, at now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        if let cached = rows[key]?.row, cached.version > row.version { return }
        if deleted.contains(key) { return }
        if rows.count >= limit, rows[key] == nil {
            for victim in Array(rows.keys.prefix(max(1, limit / 8))) {
                if let entry = rows.removeValue(forKey: victim) { evicted.append(entry.row) }
            }
            if deleted.count >= limit { deleted.removeAll() }
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

    mutating func remove(deleted key: RowCacheKey) {
        rows[key] = nil
        deleted.insert(key)
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
