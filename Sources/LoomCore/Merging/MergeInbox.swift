import Foundation

/// A committed save, as delivered to the other contexts of the coordinator.
struct SaveEvent: Sendable {
    /// The store commit that made it (``CommitReceipt/sequence``): increases with every commit
    /// through the coordinator, and saves are delivered in its order.
    var number: UInt64
    /// What the save changed, by ID.
    let changes: ObjectChanges
    /// The rows as saved, for inserted and updated objects, so that merging needs no I/O.
    let rows: [AnyObjectID: StoreRow]
    /// The inbox of the context that saved, which does not merge its own save.
    let origin: ObjectIdentifier
    /// Whether the view context merges this save (the container's `save` helper can opt out).
    let mergesIntoViewContext: Bool
    /// Committed by another coordinator or process (found in the store's history), or by a
    /// batch request: it carries no rows, and merging reads the changed objects' current rows.
    var isRemote = false
    /// The store's history of other coordinators' commits was deleted before this coordinator
    /// read it: what changed is unknown, so every registered object is refreshed.
    var refreshesEverything = false
}

/// Where the coordinator leaves saves for one context to merge, and how it wakes the context up
/// on the context's own isolation.
///
/// `@unchecked Sendable`: `pending`, `drainScheduled` and `enabled` are only touched while `lock`
/// is held; `context` is set once at creation and only opened on the context's isolation.
final class MergeInbox: @unchecked Sendable {
    let isolation: ContextIsolation
    let isViewContext: Bool
    var context: UncheckedContext?
    private let lock = NSLock()
    private var pending: [SaveEvent] = []
    private var drainScheduled = false
    private var enabled: Bool

    init(isolation: ContextIsolation, isViewContext: Bool, enabled: Bool) {
        self.isolation = isolation
        self.isViewContext = isViewContext
        self.enabled = enabled
    }

    var isEnabled: Bool {
        get { lock.withLock { enabled } }
        set { lock.withLock { enabled = newValue } }
    }

    /// Queues a save for merging and schedules the merge on the context's isolation. Never
    /// waits for the context.
    func deliver(_ event: SaveEvent) {
        let schedule: Bool = lock.withLock {
            guard enabled, event.origin != ObjectIdentifier(self), event.mergesIntoViewContext || !isViewContext else { return false }
            pending.append(event)
            if drainScheduled { return false }
            drainScheduled = true
            return true
        }
        guard schedule, let box = context else { return }
        switch isolation {
        case .mainActor:
            Task { @MainActor in box.context?.mergePendingSaves() }
        case .queue(let queue):
            queue.queue.async { box.context?.mergePendingSaves() }
        }
    }

    /// Takes the saves waiting to be merged, oldest first.
    func take() -> [SaveEvent] {
        lock.withLock {
            drainScheduled = false
            defer { pending = [] }
            return pending
        }
    }
}
