import Foundation

/// Hands out primary keys for new objects: a coordinator's part that reserves them from the store
/// in blocks, ahead of need and off every context's isolation, and remembers which keys were
/// handed out and not saved yet.
///
/// `Sendable`: one lock guards the blocks and the unsaved keys; reservations ahead run on a queue
/// of its own.
final class KeyAllocator: Sendable {
    private let store: any PersistentStore

    /// Key blocks and unsaved keys by root entity (one key space per hierarchy, as the stores
    /// reserve them: a key is unique among a hierarchy's objects): one lock for both, so that
    /// inserting an object takes it once.
    ///
    /// An entity's state is a class, found once per insert and changed in place: a dictionary's
    /// in-place update of a `KeyBlock` value, and a `Set` of every unsaved key, cost an insert
    /// a noticeable share of making and inserting an object.
    private struct Keys {
        var entities: [ObjectIdentifier: EntityKeys] = [:]
        /// The entity of the last call, which a run of inserts repeats: no hashing then.
        var last: (id: ObjectIdentifier, keys: EntityKeys)?

        mutating func of(_ id: ObjectIdentifier) -> EntityKeys {
            if let last, last.id == id { return last.keys }
            let found: EntityKeys
            if let known = entities[id] {
                found = known
            } else {
                found = EntityKeys()
                entities[id] = found
            }
            last = (id, found)
            return found
        }
    }

    /// One entity's key block and unsaved keys. Only used while ``keys``' lock is held.
    private final class EntityKeys {
        @exclusivity(unchecked) var block: KeyBlock?
        @exclusivity(unchecked) var unsaved = UnsavedKeys()
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
        /// up, else as the spare.
        ///
        /// Keys are handed out in increasing order, so that an entity's keys follow the order
        /// its objects were inserted in. A reservation ahead and a synchronous one can cross
        /// (either may reach the store first, and either may come back first): a range below
        /// this block's end is then left unused, or keys would go back to it after this block.
        /// Only a synchronous reservation (`needed`) that finds the block used up again (other
        /// threads took the keys meanwhile) uses a lower range: unique keys come first. Keys
        /// are never reused; gaps are harmless.
        mutating func take(_ range: Range<Int64>, needed: Bool = false) {
            advanceIfNeeded()
            if range.lowerBound < end && !(needed && next >= end) { return }
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
        let id = ObjectIdentifier(entity.rootEntity)
        let (key, ahead) = keys.withLock { keys -> (Int64?, Int?) in
            let state = keys.of(id)
            guard let (key, ahead) = state.block?.takeKey() else { return (nil, nil) }
            state.unsaved.insert(key)
            return (key, ahead)
        }
        if let ahead { reserveKeysAhead(for: entity, count: ahead) }
        if let key { return key }
        let size = keys.withLock { min(($0.of(id).block?.size ?? 32) * 2, 8192) }
        let range = try store.allocateKeys(for: entity, count: size)
        return keys.withLock { keys in
            let state = keys.of(id)
            var block = state.block ?? KeyBlock(next: 0, end: 0, size: size)
            block.size = max(block.size, size)
            block.take(range, needed: true)
            let key = block.next
            block.next += 1
            state.block = block
            state.unsaved.insert(key)
            return key
        }
    }

    /// Reserves the next block of keys for `entity` on the key queue, without waiting.
    private func reserveKeysAhead(for entity: EntityDescription, count: Int) {
        keyQueue.async { [weak self] in
            guard let self else { return }
            let id = ObjectIdentifier(entity.rootEntity)
            let range: Range<Int64>?
            do {
                range = try store.allocateKeys(for: entity, count: count)
            } catch {
                // Deliberately not reported here (no caller waits for it): the insert that
                // finds the blocks used up reserves synchronously and reports the error.
                range = nil
            }
            keys.withLock { keys in
                let state = keys.of(id)
                guard var block = state.block else { return }
                block.isReserving = false
                if let range { block.take(range) }
                state.block = block
            }
        }
    }

    func noteUnsaved(_ entity: EntityDescription, key: Int64) {
        keys.withLock { $0.of(ObjectIdentifier(entity.rootEntity)).unsaved.insert(key) }
    }

    func forgetUnsaved(_ entity: EntityDescription, key: Int64) {
        keys.withLock { $0.of(ObjectIdentifier(entity.rootEntity)).unsaved.remove(key) }
    }

    func isUnsaved(_ entity: EntityDescription, key: Int64) -> Bool {
        keys.withLock { $0.of(ObjectIdentifier(entity.rootEntity)).unsaved.contains(key) }
    }

    /// Forgets every reserved block: after a write transaction rolled back, the keys reserved
    /// inside it may be handed out again by the store, so they must not be by this allocator.
    /// (Keys are never reused, so dropping blocks reserved outside it only leaves gaps.)
    func dropReservedBlocks() {
        keys.withLock { keys in
            for state in keys.entities.values { state.block = nil }
        }
    }

    /// Notes that a save inserted these objects: their keys are no longer unsaved.
    func didSave(_ inserts: [StoreChangeSet.Insert]) {
        keys.withLock { keys in
            for insert in inserts { keys.of(ObjectIdentifier(insert.entity.rootEntity)).unsaved.remove(insert.key) }
        }
    }
}

/// The keys of one entity handed out and not saved yet, as bitmaps of 4,096 keys each.
///
/// Keys are handed out in order from blocks, and saved in runs: marking or clearing one is a bit
/// operation in the chunk used last, almost always. Only the error for an unsaved object's ID
/// resolved in another context (``LoomError/Code/objectNotSavedYet``) reads it.
struct UnsavedKeys {
    private struct Chunk {
        /// The chunk's first key, a multiple of ``UnsavedKeys/chunkSize``.
        let base: Int64
        var words: [UInt64]
        var count: Int
    }
    static let chunkSize: Int64 = 4096
    private var chunks: [Chunk] = []
    private var last = 0

    private mutating func chunk(of key: Int64, creating: Bool) -> Int? {
        let base = key - (key & (Self.chunkSize - 1))
        if last < chunks.count, chunks[last].base == base { return last }
        if let i = chunks.firstIndex(where: { $0.base == base }) {
            last = i
            return i
        }
        guard creating else { return nil }
        chunks.append(Chunk(base: base, words: Array(repeating: 0, count: Int(Self.chunkSize / 64)), count: 0))
        last = chunks.count - 1
        return last
    }

    /// The number of keys noted.
    var count: Int { chunks.reduce(0) { $0 + $1.count } }

    mutating func insert(_ key: Int64) {
        guard let i = chunk(of: key, creating: true) else { return }
        let offset = Int(key - chunks[i].base), bit = UInt64(1) << UInt64(offset & 63)
        if chunks[i].words[offset >> 6] & bit == 0 {
            chunks[i].words[offset >> 6] |= bit
            chunks[i].count += 1
        }
    }

    mutating func remove(_ key: Int64) {
        guard let i = chunk(of: key, creating: false) else { return }
        let offset = Int(key - chunks[i].base), bit = UInt64(1) << UInt64(offset & 63)
        guard chunks[i].words[offset >> 6] & bit != 0 else { return }
        chunks[i].words[offset >> 6] &= ~bit
        chunks[i].count -= 1
        // An empty chunk goes, unless it is the only one (a run of one-object saves would
        // otherwise make and free it each time).
        if chunks[i].count == 0, chunks.count > 1 {
            chunks.swapAt(i, chunks.count - 1)
            chunks.removeLast()
            last = 0
        }
    }

    func contains(_ key: Int64) -> Bool {
        let base = key - (key & (Self.chunkSize - 1))
        guard let chunk = chunks.first(where: { $0.base == base }) else { return false }
        let offset = Int(key - base)
        return chunk.words[offset >> 6] & (UInt64(1) << UInt64(offset & 63)) != 0
    }
}
