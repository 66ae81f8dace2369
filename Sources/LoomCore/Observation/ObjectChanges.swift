/// What changed in a context, by object ID: the `Sendable` payload of every context event.
///
/// Unlike Core Data's notifications, it holds IDs, never objects, so it can be handed to any
/// isolation domain; resolve the IDs in your own context.
public struct ObjectChanges: Sendable, Equatable, CustomStringConvertible {
    /// Objects inserted (or, in a merge, inserted by the other context's save).
    public var inserted: Set<AnyObjectID> = []
    /// Objects whose saved values changed.
    public var updated: Set<AnyObjectID> = []
    /// Objects deleted.
    public var deleted: Set<AnyObjectID> = []
    /// Registered objects whose values were reloaded from the store (refresh or merge),
    /// including faults: a list observing them never misses a change.
    public var refreshed: Set<AnyObjectID> = []
    /// For updated and refreshed objects, the names of the properties that changed.
    public var changedProperties: [AnyObjectID: Set<String>] = [:]
    /// The rows the save wrote, in a `didSave` payload of a context that saved to the store;
    /// `nil` otherwise. Not part of equality: the same changes compare equal with or without.
    var savedRows: SavedRows?

    /// An empty set of changes.
    public init() {}

    /// Whether nothing changed.
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty && refreshed.isEmpty }

    /// Every ID mentioned.
    public var allObjectIDs: Set<AnyObjectID> { inserted.union(updated).union(deleted).union(refreshed) }

    public static func == (lhs: ObjectChanges, rhs: ObjectChanges) -> Bool {
        lhs.inserted == rhs.inserted && lhs.updated == rhs.updated && lhs.deleted == rhs.deleted
            && lhs.refreshed == rhs.refreshed && lhs.changedProperties == rhs.changedProperties
    }

    public var description: String {
        "ObjectChanges(inserted: \(inserted.count), updated: \(updated.count), deleted: \(deleted.count), refreshed: \(refreshed.count))"
    }
}

/// An event a context posts, on its own isolation.
public enum ContextEvent: Sendable, Equatable {
    /// Objects changed since the last such event: at the end of every `perform`, before a
    /// save, after a merge, and (view context) at the end of the main actor's current turn.
    case objectsDidChange(ObjectChanges)
    /// A save is about to start. Observers may still change objects.
    case willSave
    /// A save committed these changes.
    case didSave(ObjectChanges)
    /// The query generation this context was pinned to was released, being older than the
    /// coordinator's ``PersistentStoreCoordinator/queryGenerationLimit``; the context now reads
    /// the generation current when it noticed (at a read or at the end of an event).
    case queryGenerationReleased(QueryGenerationToken)

    /// The kind of event, for subscribing to one kind.
    public var kind: Kind {
        switch self {
        case .objectsDidChange: .objectsDidChange
        case .willSave: .willSave
        case .didSave: .didSave
        case .queryGenerationReleased: .queryGenerationReleased
        }
    }

    public enum Kind: Sendable, Hashable {
        case objectsDidChange, willSave, didSave, queryGenerationReleased
    }
}

/// Keeps a context's event streams. `Sendable` so that a stream's termination, which may
/// happen on any thread, can remove it.
final class ContextEventHub: Sendable {
    private let continuations = Locked<[Int: AsyncStream<ContextEvent>.Continuation]>([:])
    private let nextID = Locked(0)

    func stream() -> AsyncStream<ContextEvent> {
        let id = nextID.withLock { value -> Int in value += 1; return value }
        let (stream, continuation) = AsyncStream<ContextEvent>.makeStream(bufferingPolicy: .unbounded)
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        continuations.withLock { $0[id] = continuation }
        return stream
    }

    var hasStreams: Bool { continuations.withLock { !$0.isEmpty } }

    func yield(_ event: ContextEvent) {
        let targets = continuations.withLock { Array($0.values) }
        for continuation in targets { continuation.yield(event) }
    }

    func finish() {
        let targets = continuations.withLock { all -> [AsyncStream<ContextEvent>.Continuation] in
            defer { all = [:] }
            return Array(all.values)
        }
        for continuation in targets { continuation.finish() }
    }
}

/// A registration made with ``ManagedObjectContext/addObserver(for:_:)``; pass it to
/// ``ManagedObjectContext/removeObserver(_:)`` to stop.
public struct ObserverToken: Hashable, Sendable {
    let id: Int
}
