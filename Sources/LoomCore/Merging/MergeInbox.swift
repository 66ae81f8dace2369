import Foundation

/// Where the coordinator leaves saves for one context to merge, and how it wakes the context up
/// on the context's own isolation.
///
/// It also tells the coordinator which rows the context needs from a save (``interest``), so
/// that whoever publishes a save reads them once, off the context.
///
/// `@unchecked Sendable`: `pending`, `drainScheduled`, `enabled` and `interest` are only touched
/// while `lock` is held; `context` is set once at creation and only opened on the context's
/// isolation, as are `announcedEntityCount` and `rowsBeingMerged`.
final class MergeInbox: @unchecked Sendable {
    let isolation: ContextIsolation
    let isViewContext: Bool
    var context: UncheckedContext?
    private let lock = NSLock()
    private var pending: [SaveEvent] = []
    private var drainScheduled = false
    private var enabled: Bool
    private var interest = MergeInterest()
    /// How many entities of the context's identity map ``interest`` was told of (context's
    /// isolation only).
    var announcedEntityCount = 0
    /// While the context merges, the rows the events carried, for live queries that look up
    /// objects the context does not hold (context's isolation only).
    var rowsBeingMerged: [AnyObjectID: StoreRow] = [:]

    init(isolation: ContextIsolation, isViewContext: Bool, enabled: Bool) {
        self.isolation = isolation
        self.isViewContext = isViewContext
        self.enabled = enabled
    }

    var isEnabled: Bool {
        get { lock.withLock { enabled } }
        set { lock.withLock { enabled = newValue } }
    }

    /// The entities whose rows the context needs from a save.
    var mergeInterest: MergeInterest { lock.withLock { interest } }

    /// Notes that the context registers objects of these entities: merging a save that updated
    /// one of them needs its row. Never forgotten (the context may hold such objects again).
    func noteRegistered(_ entities: some Sequence<ObjectIdentifier>) {
        lock.withLock { interest.registered.formUnion(entities) }
    }

    /// Notes that a live query of the context lists objects of `entity`: merging a save that
    /// inserted or updated one of them needs its row.
    func noteQueried(_ entity: ObjectIdentifier) {
        lock.withLock { _ = interest.queried.insert(entity) }
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
