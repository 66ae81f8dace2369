public import Observation

/// A context's undo and redo stacks: Loom's own, because Foundation's `UndoManager` is not on
/// Linux. Assign one to ``ManagedObjectContext/undoManager`` to turn undo on (it is off by
/// default, and costs nothing then), then call ``ManagedObjectContext/undo()`` and
/// ``ManagedObjectContext/redo()``.
///
/// ```swift
/// context.undoManager = UndoStack()
/// context.undoGroup("Rename") { book.title = "Threads, 2nd ed." }
/// context.undo()            // the title is back
/// context.redo()            // and renamed again
/// ```
///
/// What it records, as Core Data does: attribute values, relationships (both sides), inserts
/// and deletes (with the objects their delete rules reached), in memory only. A step costs
/// O(properties changed): the old value of each property an event changed, once per group.
/// Undo never touches the store: undoing a saved change makes a change to save. Changes
/// merged from other contexts, processes or history, a save's own work (conflict resolution)
/// and a child context's save into its parent are never recorded.
///
/// Groups: everything one *event* changes is one step, as Core Data registers undo once per
/// event: an event ends at ``ManagedObjectContext/processPendingChanges()``, which runs at the
/// end of every `perform`, before a save, before a merge and, for the view context, at the end
/// of the main actor's turn. ``ManagedObjectContext/undoGroup(_:_:)`` makes a named step of its
/// own; ``ManagedObjectContext/withoutUndo(_:)`` keeps changes out of the stack.
///
/// `@Observable`: ``canUndo``, ``canRedo``, ``undoActionName`` and ``redoActionName`` change
/// when steps are added, undone, redone or dropped (not on every property set). Not
/// `Sendable`: it belongs to the isolation of the context it is assigned to, and is used
/// there only; one stack serves one context.
@Observable
public final class UndoStack {
    /// Whether there is a step to undo (the current event's changes count).
    public private(set) var canUndo = false
    /// Whether there is an undone step to redo. A new change empties the redo stack.
    public private(set) var canRedo = false
    /// The name of the step ``ManagedObjectContext/undo()`` would undo (given by
    /// ``ManagedObjectContext/undoGroup(_:_:)`` or ``setActionName(_:)``); empty when it has none.
    public private(set) var undoActionName = ""
    /// The name of the step ``ManagedObjectContext/redo()`` would redo; empty when it has none.
    public private(set) var redoActionName = ""

    /// How many steps are kept; the oldest go first. `0` (the default) keeps every step, as
    /// Core Data's `levelsOfUndo` does. Lowering it drops the oldest steps at once.
    public var levelsOfUndo: Int {
        get { levels }
        set {
            levels = max(0, newValue)
            undoSteps.trim(to: levels, keepingOpen: isGroupOpen && mode == .normal)
            redoSteps.trim(to: levels, keepingOpen: false)
            publishState()
        }
    }

    @ObservationIgnored private var levels: Int
    /// Steps to undo, the last one on top (it may be the open group).
    @ObservationIgnored var undoSteps = UndoSteps()
    /// Steps undone, to redo, the last one on top.
    @ObservationIgnored var redoSteps = UndoSteps()
    /// The context the stack belongs to (see ``ManagedObjectContext/undoManager``).
    @ObservationIgnored weak var context: ManagedObjectContext?
    /// Where records go: the undo steps while the app changes things, the redo steps while a
    /// step is undone, the undo steps (keeping the redo steps) while one is redone.
    @ObservationIgnored var mode = Mode.normal
    /// How many ``ManagedObjectContext/withoutUndo(_:)`` blocks and internal operations are
    /// running: nothing is recorded while it is not 0.
    @ObservationIgnored var suspensions = 0
    /// How deep the ``ManagedObjectContext/undoGroup(_:_:)`` calls running are: the end of an
    /// event closes no group while it is not 0.
    @ObservationIgnored var explicitDepth = 0
    /// Whether the top group of the steps being recorded into is still open.
    @ObservationIgnored var isGroupOpen = false
    /// The name the next group opened gets (an explicit group's, before its first change).
    @ObservationIgnored var pendingName = ""
    /// The (object, slot) pairs and join rows the open group recorded: recorded once per group.
    @ObservationIgnored private var recordedSlots: Set<SlotReference> = []
    @ObservationIgnored private var recordedLinks: Set<LinkKey> = []
    /// Told the name of each step the app's changes closed (not the steps undo and redo make):
    /// the Foundation `UndoManager` mirror's hook.
    @ObservationIgnored var onStepRecorded: ((String) -> Void)?

    enum Mode { case normal, undoing, redoing }

    /// Creates an empty stack keeping at most `levelsOfUndo` steps (`0`: no limit).
    public init(levelsOfUndo: Int = 0) {
        levels = max(0, levelsOfUndo)
    }

    /// Whether changes are recorded now (not inside ``ManagedObjectContext/withoutUndo(_:)``).
    public var isUndoRegistrationEnabled: Bool { suspensions == 0 }

    /// Names the step being recorded (the current event's or group's), or, when none is open,
    /// the step on top of the undo stack: what a menu shows as "Undo <name>".
    public func setActionName(_ name: String) {
        guard mode == .normal else { return }
        undoSteps.nameTop(name)
        publishState()
    }

    /// Drops every step, to undo and to redo (Core Data's `removeAllActions()`); the objects
    /// the steps held are released. ``ManagedObjectContext/rollback()`` and
    /// ``ManagedObjectContext/reset()`` call it.
    public func removeAllActions() {
        undoSteps = UndoSteps()
        redoSteps = UndoSteps()
        isGroupOpen = false
        recordedSlots.removeAll()
        recordedLinks.removeAll()
        publishState()
    }

    /// The number of steps to undo and to redo, the open group included.
    var stepCounts: (undo: Int, redo: Int) { (undoSteps.count, redoSteps.count) }

    /// The bytes the recorded steps take (records, group marks, their arrays' capacity), not
    /// counting the objects and values they refer to: for measuring what undo costs.
    var recordedByteCount: Int { undoSteps.byteCount + redoSteps.byteCount }

    // MARK: Recording (on the context's isolation, called from the edit paths)

    var isRecording: Bool { suspensions == 0 }

    /// Records the value slot `slot` of `object` held before its first change in this group.
    func recordValue(_ object: any BackedObject, slot: Int, old: StoredValue) {
        guard recordedSlots.insert(SlotReference(backing: ObjectIdentifier(object._loomBacking), slot: slot)).inserted else { return }
        append(.value(object, slot: slot, old: old))
    }

    /// Records whether a join row existed before its first change in this group.
    func recordLink(_ link: LinkKey, owner: EntityDescription, relationship j: Int, ownerKey: Int64, otherKey: Int64, existed: Bool) {
        guard recordedLinks.insert(link).inserted else { return }
        append(.link(owner, relationship: j, owner: ownerKey, other: otherKey, existed: existed))
    }

    /// Records that an object was inserted (or brought back): undoing it deletes the object.
    func recordAppearance(_ object: any BackedObject) {
        append(.appeared(object))
    }

    /// Records that an object was deleted, with its values then: undoing it brings it back.
    func recordDisappearance(_ object: any BackedObject, values: [StoredValue]) {
        append(.disappeared(object, values: values))
    }

    private func append(_ record: UndoRecord) {
        switch mode {
        case .normal:
            if !isGroupOpen {
                openGroup(in: &undoSteps)
                if !redoSteps.isEmpty { redoSteps = UndoSteps() }
                publishState()
            }
            undoSteps.append(record)
        case .undoing:
            redoSteps.append(record)
        case .redoing:
            undoSteps.append(record)
        }
    }

    private func openGroup(in steps: inout UndoSteps) {
        steps.openGroup(named: pendingName)
        pendingName = ""
        isGroupOpen = true
    }

    // MARK: Groups

    /// The end of an event: closes the open group unless an explicit one is running.
    func endOfEvent() {
        guard explicitDepth == 0, mode == .normal else { return }
        closeGroup()
    }

    /// Closes the open group; one that recorded nothing is dropped.
    func closeGroup() {
        guard isGroupOpen else { return }
        isGroupOpen = false
        recordedSlots.removeAll(keepingCapacity: recordedSlots.count < 1024)
        recordedLinks.removeAll(keepingCapacity: recordedLinks.count < 1024)
        let recorded = mode == .normal && undoSteps.topHasRecords
        // A step played back leaves its opposite even when it changed nothing (what it named
        // was merged away since): undoing k steps and redoing k steps stay a pair.
        switch mode {
        case .normal: undoSteps.trim(to: levels, keepingOpen: false)
        case .redoing: undoSteps.trim(to: levels, keepingOpen: true)
        case .undoing: redoSteps.trim(to: levels, keepingOpen: true)
        }
        publishState()
        if recorded, let onStepRecorded { onStepRecorded(undoSteps.topName) }
    }

    /// Starts the group an undo (or redo) records the changes it makes into, named after the
    /// step it plays back.
    func beginPlayback(_ mode: Mode, name: String) {
        self.mode = mode
        pendingName = name
        if mode == .undoing { openGroup(in: &redoSteps) } else { openGroup(in: &undoSteps) }
    }

    func endPlayback() {
        closeGroup()
        mode = .normal
        pendingName = ""
    }

    /// Brings the observable properties in line with the steps.
    func publishState() {
        let undo = !undoSteps.isEmpty, redo = !redoSteps.isEmpty
        if canUndo != undo { canUndo = undo }
        if canRedo != redo { canRedo = redo }
        let undoName = undoSteps.topName, redoName = redoSteps.topName
        if undoActionName != undoName { undoActionName = undoName }
        if redoActionName != redoName { redoActionName = redoName }
    }
}

/// An (object, slot) pair recorded in the open group.
struct SlotReference: Hashable {
    let backing: ObjectIdentifier
    let slot: Int
}

/// What one change was before it happened: enough to put it back, and nothing else.
enum UndoRecord {
    /// A stored value (attribute, foreign key, order of an ordered to-many) and what it held.
    case value(any BackedObject, slot: Int, old: StoredValue)
    /// A join-table row of relationship `relationship` of `owner`'s entity, and whether it existed.
    case link(EntityDescription, relationship: Int, owner: Int64, other: Int64, existed: Bool)
    /// An object that came into the context (inserted, or brought back by an undo).
    case appeared(any BackedObject)
    /// An object deleted, with its values when it was.
    case disappeared(any BackedObject, values: [StoredValue])
}

/// Steps of records, flat: one array of records and one of group marks, so that a step of one
/// change costs one record and one mark, not two arrays of its own.
struct UndoSteps {
    private(set) var records: [UndoRecord] = []
    private var groups: [(start: Int, name: String)] = []

    var isEmpty: Bool { groups.isEmpty }
    var count: Int { groups.count }
    var topName: String { groups.last?.name ?? "" }
    var topHasRecords: Bool { groups.last.map { $0.start < records.count } ?? false }

    mutating func openGroup(named name: String) {
        groups.append((records.count, name))
    }

    mutating func append(_ record: UndoRecord) { records.append(record) }

    mutating func nameTop(_ name: String) {
        guard !groups.isEmpty else { return }
        groups[groups.count - 1].name = name
    }

    /// Takes the top group off: its name and records, in the order they were recorded.
    mutating func popGroup() -> (name: String, records: [UndoRecord])? {
        guard let top = groups.popLast() else { return nil }
        let taken = Array(records[top.start...])
        records.removeSubrange(top.start...)
        return (top.name, taken)
    }

    /// Drops empty groups at the top, and the oldest groups beyond `levels` (0: no limit).
    mutating func trim(to levels: Int, keepingOpen: Bool) {
        if !keepingOpen, let top = groups.last, top.start == records.count { groups.removeLast() }
        guard levels > 0, groups.count > levels else { return }
        let excess = groups.count - levels
        let cut = groups[excess].start
        records.removeFirst(cut)
        groups.removeFirst(excess)
        for i in groups.indices { groups[i].start -= cut }
    }

    var byteCount: Int {
        records.capacity * MemoryLayout<UndoRecord>.stride + groups.capacity * MemoryLayout<(start: Int, name: String)>.stride
    }
}
