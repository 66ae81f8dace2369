import Foundation

/// Hands out primary keys for new objects: a coordinator's part that reserves them from the store
/// in blocks, ahead of need and off every context's isolation, and remembers which keys were
/// handed out and not saved yet.
///
/// `Sendable`: one lock guards the blocks and the unsaved keys; reservations ahead run on a queue
/// of its own.
final class KeyAllocator: Sendable {
    private let store: any PersistentStore

    /// Key blocks by entity, and the keys handed out and not saved yet: one lock for both, so
    /// that inserting an object takes it once.
    private struct Keys {
        var blocks: [ObjectIdentifier: KeyBlock] = [:]
        var unsaved: Set<RowCacheKey> = []
    }
    private let keys = Locked(Keys())

    /// Where key blocks are reserved ahead (see ``allocateKey(for:)``): off every context's
    /// isolation, one reservation at a time.
    private let keyQueue = DispatchQueue(label: "Loom key reservations", qos: .utility)

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

        /// The next key of the block, and the size of the block to reserve ahead if it is time
        /// to (half of this one used, none reserved or under way); `nil` when both blocks are
        /// used up.
        mutating func takeKey() -> (key: Int64, ahead: Int?)? {
            advanceIfNeeded()
            guard next < end else { return nil }
            let key = next
            next += 1
            var ahead: Int?
            if spare == nil, !isReserving, end - next <= Int64(size / 2) {
                isReserving = true
                size = min(size * 2, 8192)
                ahead = size
            }
            return (key, ahead)
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

    init(store: any PersistentStore) {
        self.store = store
    }

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
            // Taken in place: one lookup of the entity's block, not a copy written back.
            guard let (key, ahead) = keys.blocks[id]?.takeKey() else { return (nil, nil) }
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

    /// Forgets every reserved block: after a write transaction rolled back, the keys reserved
    /// inside it may be handed out again by the store, so they must not be by this allocator.
    /// (Keys are never reused, so dropping blocks reserved outside it only leaves gaps.)
    func dropReservedBlocks() {
        keys.withLock { $0.blocks = [:] }
    }

    /// Notes that a save inserted these objects: their keys are no longer unsaved.
    func didSave(_ inserts: [StoreChangeSet.Insert]) {
        keys.withLock { keys in
            for insert in inserts { keys.unsaved.remove(RowCacheKey(entity: ObjectIdentifier(insert.entity), key: insert.key)) }
        }
    }
}
