import Foundation

/// The key of the one section of a live query without sections.
public struct NoSection: Hashable, Sendable {
    public init() {}
}

/// One result of a live query: its sections of object IDs, and (from the second result on) the
/// exact change from the result before it.
///
/// Items are IDs, never objects, so a result is `Sendable`: hand it to a diffable data source,
/// a terminal renderer or a WebSocket, and resolve the IDs in a context where you need objects.
public struct LiveResults<Model: PersistentModel, SectionKey: Hashable & Sendable>: Sendable, Equatable {
    /// A run of items with the same section key.
    public struct Section: Sendable, Equatable {
        /// The value of the section key path for the section's objects (``NoSection`` for a query
        /// without sections).
        public let key: SectionKey
        /// The section's objects, in the request's order.
        public let items: [ObjectID<Model>]
    }

    /// The sections, ordered by their key (ascending, `nil` first), then the request's sort.
    /// A query without sections has exactly one section, possibly empty.
    public let sections: [Section]
    /// What turns the previous result into this one; `nil` for the first result.
    public let changes: ResultChanges?

    /// Every item, section after section.
    public var items: [ObjectID<Model>] { sections.flatMap(\.items) }

    /// How many items there are in all sections.
    public var count: Int { sections.reduce(0) { $0 + $1.items.count } }

    /// The item at a position.
    public subscript(position: ResultPosition) -> ObjectID<Model> { sections[position.section].items[position.item] }
}

/// A live query's results as an `AsyncSequence`: the current result first, then after every
/// change that alters it the new result with the change from the one before (``LiveResults``).
///
/// Made by ``ManagedObjectContext/liveQuery(_:)`` or
/// ``ManagedObjectContext/liveQuery(_:sectionedBy:)``; the context keeps it current on its own
/// isolation from everything that changes its objects: its own unsaved changes (at the end of
/// each event), merges of other contexts' saves and of other processes' commits, child saves,
/// resets, and changes to related objects the predicate, sort or section key reads.
///
/// An element's ``LiveResults/changes`` is never empty: a change that leaves the result as it
/// was (the same items in the same sections and order, none of them updated) makes no element,
/// even when it touched objects the query reads (a save that changes a property the query reads
/// without moving anything, an object that enters and leaves again before the reader reads).
/// Updates of objects in the result are changes: an element lists them in
/// ``ResultChanges/updatedItems``, with the properties that changed, as a fetched results
/// controller reports `.update`. The first element, the result when the query starts, comes
/// even when it is empty.
///
/// Results that arrive while nobody reads are coalesced: the next element is the newest result,
/// with the one change from the last element read to it. A consumer that stops reading holds
/// one result, whatever the number of saves since. Iterate it from one task; the sequence ends
/// when that task is cancelled or the context is deallocated, and throws if the store fails
/// while the result is evaluated again.
///
/// ```swift
/// let live = try context.liveQuery(FetchRequest<Book>(sortBy: [SortDescriptor(\.title)]),
///                                  sectionedBy: \.author?.name)
/// for try await results in live {
///     if let changes = results.changes { apply(changes) } else { show(results) }
/// }
/// ```
public struct LiveQuery<Model: PersistentModel, SectionKey: Hashable & Sendable>: AsyncSequence, Sendable {
    public typealias Element = LiveResults<Model, SectionKey>
    public typealias Failure = LoomError

    let channel: LiveQueryChannel<Model, SectionKey>

    public func makeAsyncIterator() -> Iterator { Iterator(channel: channel) }

    /// Reads a live query's results; see ``LiveQuery``.
    public struct Iterator: AsyncIteratorProtocol {
        let channel: LiveQueryChannel<Model, SectionKey>

        public mutating func next() async throws(LoomError) -> LiveResults<Model, SectionKey>? {
            try await channel.next(isolation: nil)
        }

        /// The next result, read on the caller's actor (what `for try await` calls): no hop to
        /// another executor when a result is ready.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(LoomError) -> LiveResults<Model, SectionKey>? {
            try await channel.next(isolation: actor)
        }
    }
}

/// Carries a live query's results from its context to whoever reads them.
///
/// Sendable: its state is behind a lock. Results are received on the context's isolation and
/// read from any task.
final class LiveQueryChannel<Model: PersistentModel, SectionKey: Hashable & Sendable>: LiveQuerySink, Sendable {
    private struct State {
        /// The last result read, and the newest one not read yet.
        var delivered: LiveSnapshot?
        var latest: LiveSnapshot?
        /// What changed of the items since `delivered`.
        var updated: [Int64: Set<String>] = [:]
        /// The items that may have entered, left or moved since `delivered`; nil: any.
        var touched: Set<Int64>? = []
        /// The keys of `latest`'s sections.
        var keys: [SectionIdentity: SectionKey] = [:]
        /// The entity of each item of `latest` that is not the query's own (see
        /// ``LiveQuerySink/receive(_:updated:touched:entities:in:)``).
        var entities: [Int64: String] = [:]
        /// The last element read (made from `delivered`), whose unchanged sections the next one
        /// reuses.
        var read: LiveResults<Model, SectionKey>?
        var failure: LoomError?
        var finished = false
    }

    private let state = Locked(State())
    /// The reader waiting for a result. Taken after `state`'s lock is released by those that
    /// change it; the reader holds it while it looks at `state`, so no wake-up is lost.
    private let wakeUp = Locked(WakeUp())
    /// Used only by `receive`, on the context's isolation.
    private let sectionKeys: Locked<SectionKeys<Model, SectionKey>>
    let storeIdentifier: UUID

    init(sectionKeyPath: (any KeyPath<Model, SectionKey> & Sendable)?, in context: ManagedObjectContext) throws(LoomError) {
        self.sectionKeys = Locked(try SectionKeys(sectionKeyPath, in: context))
        self.storeIdentifier = context.coordinator.storeIdentifier
    }

    func receive(_ result: LiveSnapshot, updated: [Int64: Set<String>], touched: Set<Int64>?, entities: [Int64: String], in context: ManagedObjectContext) {
        let keys = sectionKeys.withLock { $0.keys(of: result, entities: entities, in: context) }
        state.withLock { state in
            state.latest = result
            state.entities = entities
            // Nothing waiting (the reader took the last result): taken as they are, not rehashed.
            if state.updated.isEmpty {
                state.updated = updated
            } else {
                for (key, properties) in updated { state.updated[key, default: []].formUnion(properties) }
            }
            if let touched, state.touched != nil {
                if state.touched!.isEmpty { state.touched = touched } else { state.touched!.formUnion(touched) }
            } else {
                state.touched = nil
            }
            state.keys = keys
        }
        WakeUp.wake(wakeUp)
    }

    func fail(_ error: LoomError) {
        state.withLock { $0.failure = error }
        WakeUp.wake(wakeUp)
    }

    func finish() {
        state.withLock { $0.finished = true }
        WakeUp.wake(wakeUp)
    }

    private enum Step {
        case deliver(previous: LiveSnapshot?, latest: LiveSnapshot, updated: [Int64: Set<String>], touched: Set<Int64>?, keys: [SectionIdentity: SectionKey], entities: [Int64: String], read: LiveResults<Model, SectionKey>?)
        case fail(LoomError)
        case end
        case wait
    }

    func next(isolation actor: isolated (any Actor)?) async throws(LoomError) -> LiveResults<Model, SectionKey>? {
        while true {
            if Task.isCancelled { return nil }
            switch try ready() {
            case .results(let results):
                return results
            case .end:
                return nil
            case .wait:
                await WakeUp.wait(wakeUp, isolation: actor) {
                    state.withLock { $0.latest != nil || $0.failure != nil || $0.finished }
                }
            }
        }
    }

    /// How many results the channel holds (the last read and the newest): never more than two,
    /// whatever the number of changes since the reader last read.
    var heldResults: Int { state.withLock { ($0.delivered == nil ? 0 : 1) + ($0.latest == nil ? 0 : 1) } }

    /// How many times readers started waiting for a result.
    var waits: Int { wakeUp.withLock { $0.waits } }

    /// The next result if one is ready, else nil, without waiting.
    func poll() throws(LoomError) -> LiveResults<Model, SectionKey>? {
        if case .results(let results) = try ready() { return results }
        return nil
    }

    private enum Ready {
        case results(LiveResults<Model, SectionKey>)
        case end
        case wait
    }

    /// The next element, if one is ready. A result that changes nothing since the last element
    /// (the same items in the same sections and order, none updated) makes none: its change
    /// would be empty, and a reader would redraw for nothing. Every later result still diffs
    /// against what the reader has.
    private func ready() throws(LoomError) -> Ready {
        while true {
            switch takeStep() {
            case .deliver(let previous, let latest, let updated, let touched, let keys, let entities, let read):
                if let results = results(latest, previous: previous, read: read, updated: updated, touched: touched, keys: keys, entities: entities) {
                    return .results(results)
                }
            case .fail(let error):
                throw error
            case .end:
                return .end
            case .wait:
                return .wait
            }
        }
    }

    private func takeStep() -> Step {
        state.withLock { state -> Step in
            if let latest = state.latest {
                defer {
                    state.delivered = latest
                    state.latest = nil
                    state.updated = [:]
                    state.touched = []
                }
                return .deliver(previous: state.delivered, latest: latest, updated: state.updated, touched: state.touched, keys: state.keys, entities: state.entities, read: state.read)
            }
            if let failure = state.failure {
                state.failure = nil
                state.finished = true
                return .fail(failure)
            }
            return state.finished ? .end : .wait
        }
    }

    /// The element for `snapshot`: its change from `previous` (the last snapshot read, from which
    /// `read` was made), its sections (those unchanged taken from `read`). Noted as the last read.
    /// Nil when the change is empty: `read` then stands for `snapshot` too.
    private func results(
        _ snapshot: LiveSnapshot, previous: LiveSnapshot?, read: LiveResults<Model, SectionKey>?,
        updated: [Int64: Set<String>], touched: Set<Int64>?, keys: [SectionIdentity: SectionKey], entities: [Int64: String]
    ) -> LiveResults<Model, SectionKey>? {
        let changes = previous.map { SectionedDiff.changes(from: $0, to: snapshot, updated: updated, touchedKeys: touched) }
        if let changes, changes.isEmpty { return nil }
        let earlier = previous.flatMap { previous in read.map { (previous, $0) } }
        let results = LiveResults(snapshot, changes: changes, keys: keys, entities: entities, storeIdentifier: storeIdentifier, previous: earlier)
        state.withLock { $0.read = results }
        return results
    }
}

extension LiveResults {
    /// The public form of a snapshot: IDs for keys, section keys for section identities. A
    /// section that holds the same items as in `previous` (the snapshot and the results made
    /// from it) is taken from there, not made again.
    init(_ snapshot: LiveSnapshot, changes: ResultChanges?, keys: [SectionIdentity: SectionKey], entities: [Int64: String] = [:], storeIdentifier: UUID,
         previous: (snapshot: LiveSnapshot, results: LiveResults)? = nil) {
        let entityName = Model.entity.name
        var before: [SectionIdentity: Int] = [:]
        if let previous, previous.snapshot.sections.count == previous.results.sections.count {
            for (s, section) in previous.snapshot.sections.enumerated() { before[section.key] = s }
        }
        self.sections = snapshot.sections.map { section in
            if let s = before[section.key], let previous, previous.snapshot.sections[s].items == section.items {
                return previous.results.sections[s]
            }
            return Section(key: keys[section.key]!, items: Self.objectIDs(section.items, storeIdentifier: storeIdentifier, entityName: entityName, entities: entities))
        }
        self.changes = changes
    }

    /// The IDs of these keys. Written as `AnyObjectID`s into the array's memory: code generic
    /// over the model makes a typed ID and appends it through the model's metadata (about 400
    /// instructions an item in a shuffle of 10,000), where an `ObjectID` is an `AnyObjectID`
    /// and nothing else, so the two share their layout.
    static func objectIDs(_ keys: [Int64], storeIdentifier: UUID, entityName: String, entities: [Int64: String] = [:]) -> [ObjectID<Model>] {
        precondition(MemoryLayout<ObjectID<Model>>.size == MemoryLayout<AnyObjectID>.size
            && MemoryLayout<ObjectID<Model>>.stride == MemoryLayout<AnyObjectID>.stride
            && MemoryLayout<ObjectID<Model>>.alignment == MemoryLayout<AnyObjectID>.alignment)
        // Not through the unsafe initializer when empty: see ManagedObjectContext.models(_:).
        if keys.isEmpty { return [] }
        return [ObjectID<Model>](unsafeUninitializedCapacity: keys.count) { buffer, count in
            buffer.withMemoryRebound(to: AnyObjectID.self) { ids in
                if entities.isEmpty {
                    for (i, key) in keys.enumerated() {
                        (ids.baseAddress! + i).initialize(to: AnyObjectID(storeIdentifier: storeIdentifier, entityName: entityName, primaryKey: key))
                    }
                } else {
                    // A query over a hierarchy: each item's ID names its own entity.
                    for (i, key) in keys.enumerated() {
                        (ids.baseAddress! + i).initialize(to: AnyObjectID(storeIdentifier: storeIdentifier, entityName: entities[key] ?? entityName, primaryKey: key))
                    }
                }
            }
            count = keys.count
        }
    }
}

/// The keys of a live query's sections: the value of the section key path, read once per
/// section through one of its objects, on the context's isolation.
struct SectionKeys<Model: PersistentModel, SectionKey: Hashable & Sendable>: Sendable {
    let keyPath: (any KeyPath<Model, SectionKey> & Sendable)?
    let entity: EntityDescription
    /// The keys of the last result's sections.
    private var known: [SectionIdentity: SectionKey] = [:]

    init(_ keyPath: (any KeyPath<Model, SectionKey> & Sendable)?, in context: ManagedObjectContext) throws(LoomError) {
        self.keyPath = keyPath
        self.entity = try context.coordinator.schema.requireEntity(named: Model.entity.name)
    }

    /// The keys of `result`'s sections; those not known from the last result are read now.
    mutating func keys(of result: LiveSnapshot, entities: [Int64: String] = [:], in context: ManagedObjectContext) -> [SectionIdentity: SectionKey] {
        var keys: [SectionIdentity: SectionKey] = [:]
        keys.reserveCapacity(result.sections.count)
        for section in result.sections {
            keys[section.key] = known[section.key] ?? key(of: section, entities: entities, in: context)
        }
        known = keys
        return keys
    }

    private func key(of section: LiveSnapshot.Section, entities: [Int64: String], in context: ManagedObjectContext) -> SectionKey {
        guard let keyPath else { return NoSection() as! SectionKey }
        // No value: nil. (Read through an object, a path to a related object deleted but still
        // pointed to would give that object's value, where the query counts no object.)
        if section.key.value == .null, let optional = SectionKey.self as? any ExpressibleByNilLiteral.Type {
            return optional.init(nilLiteral: ()) as! SectionKey
        }
        // Every item of the section has this key: read it through the first one.
        let first = section.items[0]
        let owner = entities[first].flatMap { context.coordinator.schema.entity(named: $0) } ?? entity
        let object = context.object(of: owner, key: first) as! Model
        return object[keyPath: keyPath]
    }
}

/// A reader's wait for a live query's next result.
struct WakeUp {
    var continuation: CheckedContinuation<Void, Never>?
    /// How many times a reader started waiting: tests read it to tell a wait from a spin.
    var waits = 0

    /// Suspends until ``wake(_:)`` or the task's cancellation, unless `isReady` (called with
    /// the lock held) says there is something to read already.
    ///
    /// A cancellation that comes before the continuation is stored is seen by `Task.isCancelled`
    /// under the lock: the task's flag is set before its handler runs. Nothing else remembers it,
    /// so a later reader of the same query, in a task that is not cancelled, waits as it should.
    static func wait(_ lock: Locked<WakeUp>, isolation actor: isolated (any Actor)?, unlessReady isReady: () -> Bool) async {
        await withTaskCancellationHandler(operation: {
            await withCheckedContinuation(isolation: actor) { (continuation: CheckedContinuation<Void, Never>) in
                let ready = lock.withLock { wakeUp -> Bool in
                    wakeUp.waits += 1
                    if Task.isCancelled || isReady() { return true }
                    // One reader at a time: a second one replaces the first, which looks again.
                    wakeUp.continuation?.resume()
                    wakeUp.continuation = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }, onCancel: {
            lock.withLock { wakeUp -> CheckedContinuation<Void, Never>? in
                defer { wakeUp.continuation = nil }
                return wakeUp.continuation
            }?.resume()
        }, isolation: actor)
    }

    /// Resumes the waiting reader, if any.
    static func wake(_ lock: Locked<WakeUp>) {
        lock.withLock { wakeUp -> CheckedContinuation<Void, Never>? in
            defer { wakeUp.continuation = nil }
            return wakeUp.continuation
        }?.resume()
    }
}
