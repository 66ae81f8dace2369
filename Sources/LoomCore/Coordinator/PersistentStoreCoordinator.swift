public import Foundation
import Synchronization

/// The one object all contexts of a container share: it owns the store, hands out primary
/// keys (its `KeyAllocator`), delivers every save to the other contexts in commit order (the
/// store serializes the writes themselves), and keeps a cache of row snapshots that every
/// context fills faults from.
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
    /// Hands out primary keys, reserving them from the store in blocks.
    let keyAllocator: KeyAllocator
    /// Whether each hierarchy's saved objects have keys of their own.
    let keySpaceCheck = KeySpaceCheck()
    /// The entity of each key of a hierarchy that a relationship led to (see
    /// ``ManagedObjectContext/destinationEntity(of:key:)``).
    let keyEntities = KeyEntities()
    /// Puts saves in commit order on their way to other contexts.
    private let sequencer: SaveSequencer
    /// The write transaction this coordinator runs now (``write(_:_:)``), if any: the saves it
    /// made, which are delivered when it commits (and dropped if it rolls back), and the rows
    /// they changed. Which thread runs it, the store's ``PersistentStore/writeScope`` knows:
    /// that thread's saves are held or noted here, and what it reads may be its own
    /// uncommitted saves, which must not reach the shared cache.
    private let openWrite = Locked<OpenWrite?>(nil)
    private let inboxes = Locked<[ObjectIdentifier: MergeInbox]>([:])
    /// The streams of ``remoteChanges()``.
    private let remoteStreams = Locked<[Int: AsyncStream<RemoteChangeEvent>.Continuation]>([:])
    private let nextRemoteStream = Atomic<Int>(0)
    private let remoteFailure = Locked<LoomError?>(nil)

    struct OpenWrite {
        /// Whether saves made inside are delivered when it commits (``WriteOptions/holdsEvents``).
        let holdsEvents: Bool
        var events: [SaveEvent] = []
        /// The rows its saves changed or deleted. Until the commit, other threads read (and may
        /// cache, or keep in faults) these rows as they were before: at the commit they are
        /// marked changed again and dropped from the cache.
        var changedRows: [RowCacheKey] = []
        /// More rows changed than the change log keeps (a large batch request): the commit then
        /// forgets the whole cache, and ``changedRows`` stops growing.
        var changedTooMany = false

        mutating func noteChanged(_ changes: StoreChangeSet) {
            guard !changedTooMany else { return }
            if changedRows.count + changes.updates.count + changes.deletes.count > ChangeLog.limit {
                changedTooMany = true
                changedRows = []
                return
            }
            for update in changes.updates { changedRows.append(update.rowKey) }
            for delete in changes.deletes { changedRows.append(delete.rowKey) }
        }
    }
    /// Bumped by every save that changes or deletes rows; read without a lock by faults that
    /// hold their fetched rows, to know whether those may have changed since.
    private let changeGeneration = Atomic<UInt64>(0)
    /// The generation at which each changed or deleted row last changed.
    private let changeLog = Locked(ChangeLog())
    private let generationLimit = Locked(QueryGenerationLimit())

    /// How old a query generation may get, and how much it may keep the store from reclaiming,
    /// before it is released (see ``ManagedObjectContext/setQueryGenerationFrom(_:)``). Applies
    /// to generations pinned after it is set. Any thread.
    public var queryGenerationLimit: QueryGenerationLimit {
        get { generationLimit.withLock { $0 } }
        set { generationLimit.withLock { $0 = newValue } }
    }

    struct ChangeLog {
        var changedAt: [RowCacheKey: UInt64] = [:]
        /// Changes before this generation were forgotten (the log is bounded).
        var forgottenBefore: UInt64 = 0
        static let limit = 100_000
    }

    /// Creates a coordinator for an open store.
    ///
    /// - Parameters:
    ///   - store: the open store every context of this coordinator reads and saves through.
    ///   - rowCacheLimit: how many row snapshots the shared cache keeps at most.
    public init(store: any PersistentStore, rowCacheLimit: Int = 200_000) {
        self.store = store
        self.schema = store.schema
        self.storeIdentifier = store.identifier
        self.identity = StoreIdentity(uuid: store.identifier)
        self.rowCache = Locked(RowCache(limit: rowCacheLimit))
        self.keyAllocator = KeyAllocator(store: store)
        self.sequencer = SaveSequencer(after: store.lastCommitSequence)
        store.observeRemoteCommits { [weak self] commits in self?.receive(commits) }
    }

    // MARK: Reading
    //
    // Each read takes the snapshot of a context pinned to a query generation (`pinned`), or
    // nil for the store's latest data. Rows read from a snapshot never go into (or come from)
    // the shared cache, which holds the latest rows.

    func fetch(_ query: StoreQuery, pinned: (any StoreSnapshot)? = nil) throws(LoomError) -> [StoreRow] {
        let rows = try (pinned ?? store as any StoreReading).fetch(query)
        try validate(rows, of: query.entity)
        return rows
    }

    /// ``fetch(_:pinned:)``, where rows `isKnown` accepts come back without values (see
    /// ``PersistentStore/fetch(_:skippingValuesOf:)``); the others are validated as usual. The
    /// caller checks that the rows without values are exactly those it accepted.
    func fetch(_ query: StoreQuery, pinned: (any StoreSnapshot)? = nil, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        let rows = try (pinned ?? store as any StoreReading).fetch(query, skippingValuesOf: isKnown)
        try validate(rows, of: query.entity, allowingValuesLeftOut: true)
        return rows
    }

    func count(_ query: StoreQuery, pinned: (any StoreSnapshot)? = nil) throws(LoomError) -> Int {
        try (pinned ?? store as any StoreReading).count(query)
    }

    /// The current row for a key: from the shared cache when there (and not older than
    /// `maximumAge` seconds, when one is given), else from the store.
    func row(of entity: EntityDescription, key: Int64, bypassingCache: Bool = false, maximumAge: Double = -1, pinned: (any StoreSnapshot)? = nil) throws(LoomError) -> StoreRow? {
        if let pinned {
            let row = try pinned.row(of: entity, key: key)
            if let row { try validate(CollectionOfOne(row), of: entity) }
            return row
        }
        let cacheKey = RowCacheKey(entity: ObjectIdentifier(entity), key: key)
        if !bypassingCache, let cached = rowCache.withLock({ $0.row(for: cacheKey, maximumAge: maximumAge) }) { return cached }
        let generation = currentGeneration
        guard let row = try store.row(of: entity, key: key) else {
            // Gone (deleted elsewhere): a row cached before must not bring it back to a fault.
            if bypassingCache { rowCache.withLock { $0.remove(deleted: cacheKey) } }
            return nil
        }
        try validate(CollectionOfOne(row), of: entity)
        // A fresh read (an ID lookup) loads its object at once: no fault needs the row later.
        if bypassingCache { return row }
        cache(CollectionOfOne(row), of: entity, readAt: generation)
        return row
    }

    /// The row the shared cache holds for a key, if any. No I/O.
    func cachedRow(of entity: EntityDescription, key: Int64) -> StoreRow? {
        rowCache.withLock { $0.row(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key), maximumAge: -1) }
    }

    /// The rows with these keys, read from the store in one query and put in the shared cache.
    func rows(of entity: EntityDescription, keys: [Int64], pinned: (any StoreSnapshot)? = nil) throws(LoomError) -> [StoreRow] {
        if keys.isEmpty { return [] }
        let generation = currentGeneration
        let rows = try (pinned ?? store as any StoreReading).rows(of: entity, keys: keys)
        try validate(rows, of: entity)
        if pinned == nil { cache(rows, of: entity, readAt: generation) }
        return rows
    }

    /// The rows a to-many relationship leads to for each of `keys` (one store query), put in
    /// the shared cache so that faults over them fire without I/O.
    func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64], pinned: (any StoreSnapshot)? = nil) throws(LoomError) -> [RelatedRow] {
        let related = try (pinned ?? store as any StoreReading).fetchRelated(relationship, keys: keys)
        try validate(related.map(\.row), of: relationship.destination)
        return related
    }

    /// Puts fetched rows in the shared cache, so that faults over them fire without I/O.
    ///
    /// `generation` is ``currentGeneration`` read before the store read that returned the rows.
    /// A row that a save changed or deleted since then is left out: the save may have updated
    /// the cache already, and the older row must not come back. The change log is read under
    /// the cache's lock (the one nesting of the two locks), so a save either has logged its
    /// changes by then or forgets the row from the cache after this.
    ///
    /// Rows read by a thread inside a write transaction are not cached: they may hold its
    /// uncommitted saves.
    func cache(_ rows: some Collection<StoreRow>, of entity: EntityDescription, readAt generation: UInt64) {
        guard !rows.isEmpty, !inWriteTransactionOnThisThread else { return }
        let id = ObjectIdentifier(entity)
        let now = DispatchTime.now().uptimeNanoseconds
        let evicted = rowCache.withLock { cache in
            if currentGeneration == generation {
                for row in rows { cache.insert(row, for: RowCacheKey(entity: id, key: row.key), at: now) }
            } else {
                changeLog.withLock { log in
                    guard generation >= log.forgottenBefore else { return }
                    for row in rows {
                        let key = RowCacheKey(entity: id, key: row.key)
                        if (log.changedAt[key] ?? 0) <= generation { cache.insert(row, for: key, at: now) }
                    }
                }
            }
            return cache.takeEvicted()
        }
        withExtendedLifetime(evicted) {}   // freed here, after the lock is released
    }

    private func validate(_ rows: some Collection<StoreRow>, of entity: EntityDescription, allowingValuesLeftOut: Bool = false) throws(LoomError) {
        let attributes = entity.attributes
        let kinds = entity.attributeKinds
        let accepted = entity.acceptedKinds
        let checkedInFull = entity.slotsCheckedInFull
        for row in rows {
            if allowingValuesLeftOut && row.values.isEmpty { continue }
            guard row.values.count == entity.storedValueCount else {
                throw LoomError(.corruptValue, "The store returned \(row.values.count) values for \(entity.name)/\(row.key), which has \(entity.storedValueCount).", entity: entity.name)
            }
            // Every value of the right kind (the rule for almost every row): only UUIDs' sizes
            // are left to check. Otherwise the checks below find the value and name it.
            var kindsMatch = true
            row.values.withUnsafeBufferPointer { values in
                for slot in values.indices where accepted[slot] & values[slot].kindBit == 0 { kindsMatch = false; break }
            }
            if kindsMatch && checkedInFull.allSatisfy({ kinds[$0].type.accepts(row.values[$0]) }) { continue }
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

    // MARK: Writing

    /// Applies a change set in one store transaction and updates the shared cache. Returns the
    /// commit's receipt: the caller must then ``publish(_:for:)`` the save, once, whatever
    /// happens, so that later saves are not held back.
    ///
    /// Takes no lock of the coordinator's: the store serializes writes. A refused change set
    /// throws the store's error, with the conflicts it found (``LoomError/storeConflicts``).
    func save(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        let receipt = try store.apply(changes)
        let inTransaction = inWriteTransactionOnThisThread
        if inTransaction { openWrite.withLock { $0?.noteChanged(changes) } }
        didApply(changes, committed: !inTransaction)
        return receipt
    }

    /// Whether this thread holds the store's write (a write transaction: this coordinator's
    /// ``write(_:_:)``). No lock: every save outside a transaction passes at once.
    private var inWriteTransactionOnThisThread: Bool { store.writeScope.isHeldByCurrentThread }

    /// Hands a committed save (`event`, or nothing when no one needs its contents) to every
    /// other context for merging, in commit order; see ``SaveSequencer``. A save made inside an
    /// exclusive write is held until that write commits. Never waits for the contexts.
    func publish(_ event: SaveEvent?, for receipt: CommitReceipt) {
        let heldBack = inWriteTransactionOnThisThread && openWrite.withLock { write -> Bool in
            guard write?.holdsEvents == true else { return false }
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

    /// How a write made through ``write(_:_:)`` runs.
    struct WriteOptions {
        /// The saves made inside reach other contexts when the transaction commits, in commit
        /// order (an exclusive write, a batch request); without it, each save publishes itself
        /// with the receipt it is given (a save's last tries at resolving its conflicts).
        var holdsEvents: Bool
        /// On a thread that already holds the store's write, `body` runs inside that write (a
        /// batch request made in an exclusive write); without it, that is a programmer error.
        var joinsOpenWrite: Bool

        /// ``PersistentContainer/performExclusiveWrite(_:)``.
        static let exclusive = WriteOptions(holdsEvents: true, joinsOpenWrite: false)
        /// A batch request: its own transaction, or the exclusive write it is made in.
        static let batch = WriteOptions(holdsEvents: true, joinsOpenWrite: true)
        /// A save's last tries at resolving its conflicts.
        static let save = WriteOptions(holdsEvents: false, joinsOpenWrite: false)
    }

    /// Runs `body` inside one store write transaction (``PersistentStore/withWriteTransaction(_:)``):
    /// no other coordinator or process can commit between what `body` reads and what it saves,
    /// and what it reads through this coordinator on this thread sees what it saved. If `body`
    /// throws, nothing of it is written or delivered, and its error is rethrown unchanged.
    /// Returns `body`'s value and the commit's receipt (inside a write joined, the receipt that
    /// write will commit under).
    ///
    /// Holds no lock of the coordinator's while `body` runs: other contexts keep reading, and
    /// their saves wait for the store's writer.
    func write<T>(_ options: WriteOptions, _ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) {
        if options.joinsOpenWrite && inWriteTransactionOnThisThread { return (try body(), store.writeScope.receiptOfOpenTransaction) }
        var finished = OpenWrite(holdsEvents: options.holdsEvents)
        let outcome: (value: T, receipt: CommitReceipt)
        do {
            // `openWrite` is cleared before the transaction ends, so that the next one starts clean.
            outcome = try store.withWriteTransaction { () throws -> T in
                openWrite.withLock { $0 = OpenWrite(holdsEvents: options.holdsEvents) }
                defer { finished = openWrite.withLock { write in defer { write = nil }; return write! } }
                return try body()
            }
        } catch {
            // Nothing the rolled-back saves wrote reached the shared cache (see `didApply` and
            // `cache(_:of:readAt:)`): what other threads cached meanwhile is the committed data.
            // Key blocks reserved inside the transaction were rolled back with it.
            keyAllocator.dropReservedBlocks()
            throw error
        }
        // Until the commit, other threads read the rows as they were before the saves inside,
        // and may have cached them or kept them in faults: those reads are older than the
        // commit, and are marked so.
        if finished.changedTooMany { forgetCachedRows() } else { forgetChangedRows(finished.changedRows, deleted: []) }
        if options.holdsEvents {
            deliver(finished.events.map { var event = $0; event.number = outcome.receipt.sequence; return event }, sequence: outcome.receipt.sequence)
        }
        return outcome
    }

    /// Empties the shared cache and marks every row as possibly changed.
    private func forgetCachedRows() {
        changeLog.withLock { log in
            let generation = changeGeneration.load(ordering: .relaxed) + 1
            log.changedAt.removeAll()
            log.forgottenBefore = generation
            changeGeneration.store(generation, ordering: .releasing)
        }
        let dropped = rowCache.withLock { cache -> RowCache in
            defer { cache = RowCache(limit: cache.limit) }
            return cache
        }
        withExtendedLifetime(dropped) {}   // freed here, after the lock is released
    }

    /// Updates the shared cache after a save: changed rows are updated (or dropped), deleted
    /// ones forgotten. A save inside a write transaction (not `committed` yet) drops its changed
    /// rows instead: other threads must not read them before the commit, which marks them
    /// changed again (``forgetChangedRows(_:deleted:)``). New rows are not added: the saving
    /// context holds their objects, the save event carries them to the contexts that merge, and
    /// a bulk import would otherwise churn the cache (and its lock) for rows nobody has asked for.
    private func didApply(_ changes: StoreChangeSet, committed: Bool) {
        if !changes.updates.isEmpty || !changes.deletes.isEmpty {
            // The generation moves under the log's lock: savers and the remote-change watcher
            // bump it from several threads.
            changeLog.withLock { log in
                let generation = changeGeneration.load(ordering: .relaxed) + 1
                defer { changeGeneration.store(generation, ordering: .releasing) }
                if log.changedAt.count + changes.updates.count + changes.deletes.count > ChangeLog.limit {
                    // Too many to log: everything read before this generation may have changed,
                    // which says all the entries of this save would say (a batch's thousands).
                    log.changedAt.removeAll()
                    log.forgottenBefore = generation
                    return
                }
                for update in changes.updates { log.changedAt[update.rowKey] = generation }
                for delete in changes.deletes { log.changedAt[delete.rowKey] = generation }
            }
        }
        let evicted = rowCache.withLock { cache in
            for update in changes.updates {
                let key = update.rowKey
                if committed, var row = cache.rows[key]?.row, row.version == update.expectedVersion {
                    for change in update.changes { row.values[change.index] = change.value }
                    row.version += 1
                    cache.insert(row, for: key)
                } else {
                    cache.rows[key] = nil
                }
            }
            for delete in changes.deletes {
                cache.remove(deleted: delete.rowKey)
            }
            return cache.takeEvicted()
        }
        withExtendedLifetime(evicted) {}   // freed here, after the lock is released
        keyAllocator.didSave(changes.inserts)
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

    /// Whether any context other than the one owning `inbox` merges saves automatically: only
    /// then is a save's event (its IDs and rows) worth collecting. Every context has an inbox,
    /// the container's own writer context included, but a disabled inbox drops what it is given
    /// (``MergeInbox/deliver(_:)``); a context that turns merging on later merges the saves
    /// made from then on, as in Core Data.
    func hasInboxes(besides inbox: MergeInbox) -> Bool {
        inboxes.withLock { inboxes in inboxes.values.contains { $0 !== inbox && $0.isEnabled } }
    }

    /// The entities whose rows the contexts that merge automatically need from a save, and
    /// `inbox`'s (a context merging a batch request it ran itself), merging or not.
    func mergeInterest(including inbox: MergeInbox? = nil) -> MergeInterest {
        var interest = inbox?.mergeInterest ?? MergeInterest()
        let targets = inboxes.withLock { Array($0.values) }
        for target in targets where target !== inbox && target.isEnabled { interest.formUnion(target.mergeInterest) }
        return interest
    }

    func unregister(_ inbox: MergeInbox) {
        _ = inboxes.withLock { $0.removeValue(forKey: ObjectIdentifier(inbox)) }
    }

    // MARK: Remote changes

    /// The commits other coordinators (in this process or another) make on the store, as
    /// ``RemoteChangeEvent``s, in commit order, from now until the stream is dropped or the store
    /// closed. The coordinator merges them into its automatically merging contexts whether or
    /// not anyone listens; this is for code that reacts to them (a log, a cache, a server push).
    ///
    /// Only stores that keep history (SQLite, with `recordsHistory` on, the default) report them.
    /// If watching could not start (``remoteChangesFailure``), the stream ends at once.
    public func remoteChanges() -> AsyncStream<RemoteChangeEvent> {
        let id = nextRemoteStream.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream<RemoteChangeEvent>.makeStream(bufferingPolicy: .unbounded)
        if remoteChangesFailure != nil {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.remoteStreams.withLock { $0.removeValue(forKey: id) }
        }
        remoteStreams.withLock { $0[id] = continuation }
        return stream
    }

    /// Why this coordinator cannot learn of other coordinators' commits, if the store could not
    /// start watching for them (its history could not be read): then its contexts see those
    /// commits only when they read the store, and ``remoteChanges()`` streams end at once.
    /// `nil` when watching works, or when the store keeps no history. Any thread.
    public var remoteChangesFailure: LoomError? { remoteFailure.withLock { $0 } }

    /// Ends every ``remoteChanges()`` stream (the store is closing).
    func finishRemoteChanges() {
        let streams = remoteStreams.withLock { all in
            defer { all = [:] }
            return Array(all.values)
        }
        for stream in streams { stream.finish() }
    }

    /// Other coordinators' commits, from the store's watcher thread: the shared cache forgets
    /// what they changed, the rows the merging contexts need are read (``EventRows/read(_:for:through:)``),
    /// then each is delivered to the merging contexts right after the local commit it followed (``SaveSequencer/publish(remote:after:deliver:)``), then to the
    /// ``remoteChanges()`` streams.
    private func receive(_ commits: RemoteCommits) {
        let event: RemoteChangeEvent
        switch commits {
        case .committed(let list):
            let interest = mergeInterest()
            for (transaction, after) in list {
                var changes = ObjectChanges()
                var changed: [RowCacheKey] = [], deleted: [RowCacheKey] = []
                for change in transaction.changes {
                    // An entity this model lacks (a process on another model version) has no objects here.
                    guard let entity = schema.entity(named: change.objectID.entityName) else { continue }
                    let id = change.objectID
                    let key = RowCacheKey(entity: ObjectIdentifier(entity), key: id.primaryKey)
                    switch change.kind {
                    case .insert:
                        changes.inserted.insert(id)
                    case .update(let properties):
                        changes.updated.insert(id)
                        changes.changedProperties[id, default: []].formUnion(properties)
                        changed.append(key)
                    case .delete:
                        changes.deleted.insert(id)
                        deleted.append(key)
                    }
                }
                forgetChangedRows(changed, deleted: deleted)
                // The rows the merging contexts apply, read once, here, rather than by each
                // context on its own isolation (the view context on the main actor).
                let rows = EventRows.read(changes, for: interest, through: self)
                let save = SaveEvent(number: after, changes: changes, rows: rows, origin: ObjectIdentifier(self), mergesIntoViewContext: true)
                deliver(remote: save, after: after)
            }
            event = RemoteChangeEvent(transactions: list.map(\.transaction), token: list.last?.transaction.token)
        case .historyLost(_, let current):
            forgetCachedRows()
            var save = SaveEvent(number: 0, changes: ObjectChanges(), rows: .all([:]), origin: ObjectIdentifier(self), mergesIntoViewContext: true)
            save.refreshesEverything = true
            deliver(remote: save, after: 0)
            event = RemoteChangeEvent(transactions: [], token: current, historyWasLost: true)
        case .unavailable(let error):
            remoteFailure.withLock { $0 = error }
            finishRemoteChanges()
            return
        }
        let streams = remoteStreams.withLock { Array($0.values) }
        for stream in streams { stream.yield(event) }
    }

    private func deliver(remote event: SaveEvent, after sequence: UInt64) {
        sequencer.publish(remote: [event], after: sequence) { ready in
            let targets = inboxes.withLock { Array($0.values) }
            for event in ready {
                for inbox in targets { inbox.deliver(event) }
            }
        }
    }

    /// Rows another coordinator changed or deleted, or a write transaction of this one did
    /// (committed after other threads may have read the rows before it): out of the shared
    /// cache, and noted as changed at a new generation, for faults holding their fetched rows
    /// and for reads that began before it and cache their rows after (see `didApply`).
    private func forgetChangedRows(_ changed: [RowCacheKey], deleted: [RowCacheKey]) {
        guard !changed.isEmpty || !deleted.isEmpty else { return }
        changeLog.withLock { log in
            let generation = changeGeneration.load(ordering: .relaxed) + 1
            defer { changeGeneration.store(generation, ordering: .releasing) }
            if log.changedAt.count + changed.count + deleted.count > ChangeLog.limit {
                log.changedAt.removeAll()
                log.forgottenBefore = generation
                return
            }
            for key in changed { log.changedAt[key] = generation }
            for key in deleted { log.changedAt[key] = generation }
        }
        let dropped = rowCache.withLock { cache -> [StoreRow] in
            var dropped: [StoreRow] = []
            for key in changed { if let entry = cache.rows.removeValue(forKey: key) { dropped.append(entry.row) } }
            for key in deleted { cache.remove(deleted: key) }
            return dropped
        }
        withExtendedLifetime(dropped) {}   // freed here, after the lock is released
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
