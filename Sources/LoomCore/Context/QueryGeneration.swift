import Foundation
import Dispatch
import Synchronization

/// A query generation: the store's committed data as it was at one moment, which a context
/// pinned to it reads (``ManagedObjectContext/setQueryGenerationFrom(_:)``), Core Data's
/// `NSQueryGenerationToken`.
///
/// ``current`` asks for the data as it is when the context is pinned; a context's own
/// ``ManagedObjectContext/queryGenerationToken`` names the generation it reads, and passing it
/// to another context of the same coordinator makes both read the same moment. `Sendable`; two
/// tokens are equal when they name the same generation.
public struct QueryGenerationToken: Sendable, Hashable, CustomStringConvertible {
    /// The store's data as it is when a context is pinned with this token.
    public static let current = QueryGenerationToken(pin: nil)

    /// The pinned generation; nil for ``current``.
    let pin: PinnedGeneration?

    init(pin: PinnedGeneration?) { self.pin = pin }

    public static func == (a: QueryGenerationToken, b: QueryGenerationToken) -> Bool { a.pin === b.pin }

    public func hash(into hasher: inout Hasher) { hasher.combine(pin.map(ObjectIdentifier.init)) }

    public var description: String {
        guard let pin else { return "current query generation" }
        return "query generation \(pin.number) of store \(pin.storeIdentifier.uuidString)\(pin.isReleased ? " (released)" : "")"
    }
}

/// How long a query generation may pin a store's data, and how much it may keep the store from
/// reclaiming meanwhile (SQLite: a write-ahead log that cannot be checkpointed past the oldest
/// pinned read grows with every commit). A generation past either bound is released: the
/// context reading it moves to the current generation at its next read or event and posts
/// ``ContextEvent/queryGenerationReleased(_:)``.
public struct QueryGenerationLimit: Sendable, Hashable {
    /// The oldest a generation may get. 60 seconds by default.
    public var maximumAge: Duration
    /// The most the store may keep for it, in bytes (SQLite: the size of the WAL). 256 MiB by
    /// default.
    public var maximumRetainedBytes: Int

    public init(maximumAge: Duration = .seconds(60), maximumRetainedBytes: Int = 256 << 20) {
        self.maximumAge = maximumAge
        self.maximumRetainedBytes = maximumRetainedBytes
    }
}

/// One pinned generation: the store snapshot every context pinned to it reads, and the timer
/// that releases it past its ``QueryGenerationLimit``. Freed (and its snapshot closed) when no
/// context or token holds it.
final class PinnedGeneration: Sendable {
    let number: UInt64
    let storeIdentifier: UUID
    let snapshot: any StoreSnapshot
    private let released = Atomic<Bool>(false)
    nonisolated(unsafe) private let timer: any DispatchSourceTimer
    private static let counter = Atomic<UInt64>(0)

    init(snapshot: any StoreSnapshot, storeIdentifier: UUID, limit: QueryGenerationLimit) {
        self.number = Self.counter.add(1, ordering: .relaxed).newValue
        self.storeIdentifier = storeIdentifier
        self.snapshot = snapshot
        let pinnedAt = ContinuousClock.now
        // Checked once a second (or at the age limit, when shorter).
        let interval = min(limit.maximumAge, .seconds(1))
        let nanoseconds = max(1_000_000, Int(interval.components.seconds) * 1_000_000_000 + Int(interval.components.attoseconds / 1_000_000_000))
        timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds), leeway: .milliseconds(10))
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            if ContinuousClock.now - pinnedAt >= limit.maximumAge || self.snapshot.retainedBytes > limit.maximumRetainedBytes {
                self.release()
            }
        }
        timer.activate()
    }

    deinit {
        timer.cancel()
        snapshot.close()
    }

    /// Whether the generation was released by its limit (its snapshot is closed).
    var isReleased: Bool { released.load(ordering: .acquiring) }

    /// Closes the snapshot, so that the store can reclaim what it kept; any thread.
    func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        timer.cancel()
        snapshot.close()
    }
}

extension ManagedObjectContext {
    /// The query generation this context reads, or nil when it reads the store's latest data
    /// (the default). Core Data's `queryGenerationToken`. On the context's isolation.
    public var queryGenerationToken: QueryGenerationToken? {
        ConcurrencyDebugging.check(self, #function)
        return queryGeneration
    }

    /// Pins this context's reads — fetches, faults, counts, aggregates, `existingObject(with:)`,
    /// to-many faults and prefetching — to the store's data at one moment, Core Data's
    /// `setQueryGenerationFrom(_:)`: ``QueryGenerationToken/current`` pins the data as it is now,
    /// another context's ``queryGenerationToken`` shares that context's generation, and `nil`
    /// unpins (reads see the latest data again). On the context's isolation.
    ///
    /// While pinned, another context's saves change nothing this context reads: objects keep
    /// their values, fetches their membership, and objects deleted since stay readable. The
    /// generation moves to the current data on this context's own save, when it merges saves
    /// (automatically or with ``mergeChanges(fromContextDidSave:)``), on
    /// ``reset()``, and when set again; as in Core Data, moving does not refresh registered
    /// objects (refetch, or ``refreshAllObjects()``). Saves always write against the latest data,
    /// under the ``mergePolicy``.
    ///
    /// On SQLite a generation is one read transaction on a connection of its own, which keeps
    /// the write-ahead log from being checkpointed past it: a generation older than the
    /// coordinator's ``PersistentStoreCoordinator/queryGenerationLimit`` (60 s, or 256 MiB of
    /// WAL, by default) is released, and the context moves to the current data at its next read
    /// or event, posting ``ContextEvent/queryGenerationReleased(_:)``.
    ///
    /// ```swift
    /// try context.setQueryGenerationFrom(.current)
    /// let before = try context.fetch(FetchRequest<Book>())   // the same books, whatever others save
    /// ```
    ///
    /// - Throws: ``LoomError/Code/queryGenerationUnavailable`` for a child context (it reads
    ///   through its parent: pin the parent), a store that cannot keep snapshots, another store's
    ///   token, or a generation already released.
    public func setQueryGenerationFrom(_ token: QueryGenerationToken?) throws(LoomError) {
        ConcurrencyDebugging.check(self, #function)
        guard let token else {
            queryGeneration = nil
            return
        }
        guard parent == nil else {
            throw LoomError(.queryGenerationUnavailable, "The context '\(name ?? "unnamed")' is a child context: it reads through its parent (with the parent's unsaved changes) and cannot be pinned to a query generation. Pin its parent instead.")
        }
        guard let pin = token.pin else {
            queryGeneration = try pinCurrentGeneration()
            return
        }
        guard pin.storeIdentifier == coordinator.storeIdentifier else {
            throw LoomError(.queryGenerationUnavailable, "The \(token) belongs to another store than this context's (\(coordinator.storeIdentifier.uuidString)).")
        }
        guard !pin.isReleased else {
            throw LoomError(.queryGenerationUnavailable, "The \(token) was released: it was older than the coordinator's queryGenerationLimit. Pin .current instead.")
        }
        queryGeneration = token
    }

    /// A new generation at the store's data as it is now.
    func pinCurrentGeneration() throws(LoomError) -> QueryGenerationToken {
        let snapshot = try coordinator.store.openSnapshot()
        return QueryGenerationToken(pin: PinnedGeneration(snapshot: snapshot, storeIdentifier: coordinator.storeIdentifier, limit: coordinator.queryGenerationLimit))
    }

    /// Moves a pinned context to the store's data as it is now (its own save, a merge, a
    /// reset). If no snapshot can be taken (the store was closed or failed), the context is
    /// unpinned — its reads go to the store, which reports what fails — and the error is kept in
    /// ``pendingStoreError`` (the next save throws it), never dropped.
    func advanceQueryGeneration() {
        guard queryGeneration != nil else { return }
        // What the context reads changes with no event listing it.
        liveQueriesMayHaveMissedChanges()
        do {
            queryGeneration = try pinCurrentGeneration()
        } catch {
            queryGeneration = nil
            recordReadFailure(error)
        }
    }

    /// The snapshot this context's reads go to, or nil for the store's latest data. A generation
    /// its limit released is replaced by the current one here, and the event posted at the end
    /// of the event (``processPendingChanges()``).
    func pinnedSnapshot() -> (any StoreSnapshot)? {
        guard let pin = queryGeneration?.pin else { return nil }
        guard pin.isReleased else { return pin.snapshot }
        moveOffReleasedGeneration()
        return queryGeneration?.pin?.snapshot
    }

    /// If this context's generation was released by its limit: pins the current data and
    /// notes the event to post.
    func moveOffReleasedGeneration() {
        guard let token = queryGeneration, let pin = token.pin, pin.isReleased else { return }
        releasedGeneration = token
        advanceQueryGeneration()
        scheduleEndOfEventIfNeeded()
    }

    /// The store the shared row cache stands for may fill from rows this context reads: only
    /// when it reads the latest data.
    var readsLatestData: Bool { queryGeneration == nil }
}
