import Foundation
public import Observation

/// A live query's current result for UI code: an `@Observable` object whose ``results``
/// change only when the result's IDs, order or sections change, or an observed property of one
/// of its objects (all of them unless you name some).
///
/// It belongs to its context's isolation (the main actor for the view context) and is updated
/// there, synchronously, at the end of each event that changes the result (a merge, a save,
/// the end of the main actor's turn for local edits), before `objectsDidChange` observers run.
///
/// ```swift
/// @MainActor final class BooksScreen {
///     let books: LiveResultsObserver<Book, String?>
///     init(container: PersistentContainer) throws {
///         books = try LiveResultsObserver(FetchRequest<Book>(sortBy: [SortDescriptor(\.title)]),
///                                         sectionedBy: \.author?.name, in: container.viewContext)
///     }
///     func render() { withObservationTracking { draw(books.results) } onChange: { … } }
/// }
/// ```
@Observable
public final class LiveResultsObserver<Model: PersistentModel, SectionKey: Hashable & Sendable>: LiveQuerySink {
    /// The current result; its ``LiveResults/changes`` say what changed since the one before.
    public private(set) var results: LiveResults<Model, SectionKey>
    /// Why the results stopped following changes (the store failed while the query was
    /// evaluated again), if they did.
    public private(set) var error: LoomError?

    @ObservationIgnored private var snapshot: LiveSnapshot?
    @ObservationIgnored private var sectionKeys: SectionKeys<Model, SectionKey>
    @ObservationIgnored private let observed: Set<String>?
    @ObservationIgnored private let storeIdentifier: UUID

    /// Observes the objects matching `request` in `context`, in sections by the value of
    /// `sectionKeyPath` (see ``ManagedObjectContext/liveQuery(_:sectionedBy:)``). Updates of
    /// objects change ``results`` only for the properties named in `observing` (every property
    /// when `nil`). Create it on the context's isolation.
    public convenience init(
        _ request: FetchRequest<Model>, sectionedBy sectionKeyPath: any KeyPath<Model, SectionKey> & Sendable,
        observing: [any PartialKeyPath<Model> & Sendable]? = nil, in context: ManagedObjectContext
    ) throws(LoomError) {
        try self.init(request, sectionKeyPath: sectionKeyPath, observing: observing, in: context)
    }

    init(
        _ request: FetchRequest<Model>, sectionKeyPath: (any KeyPath<Model, SectionKey> & Sendable)?,
        observing: [any PartialKeyPath<Model> & Sendable]?, in context: ManagedObjectContext
    ) throws(LoomError) {
        results = LiveResults(sections: [], changes: nil)
        sectionKeys = try SectionKeys(sectionKeyPath, in: context)
        observed = try Self.propertyNames(observing)
        storeIdentifier = context.coordinator.storeIdentifier
        try context.startLiveQuery(request, sectionKeyPath: sectionKeyPath, sink: self)
    }

    static func propertyNames(_ keyPaths: [any PartialKeyPath<Model> & Sendable]?) throws(LoomError) -> Set<String>? {
        guard let keyPaths else { return nil }
        var names: Set<String> = []
        for keyPath in keyPaths {
            guard let name = Model.loomPropertyName(for: keyPath) else {
                throw LoomError(.invalidRequest, "A key path to observe on \(Model.entity.name) does not name one of its stored properties.", entity: Model.entity.name)
            }
            names.insert(name)
        }
        return names
    }

    func receive(_ result: LiveSnapshot, updated: [Int64: Set<String>], touched: Set<Int64>?, entities: [Int64: String], in context: ManagedObjectContext) {
        var relevant = updated
        if let observed {
            relevant = updated.compactMapValues { properties in
                let seen = properties.intersection(observed)
                return seen.isEmpty ? nil : seen
            }
        }
        let changes = snapshot.map { SectionedDiff.changes(from: $0, to: result, updated: relevant, touchedKeys: touched) }
        if let changes, changes.isEmpty { return }
        let previous = snapshot.map { ($0, results) }
        snapshot = result
        results = LiveResults(result, changes: changes, keys: sectionKeys.keys(of: result, entities: entities, in: context), entities: entities,
                              storeIdentifier: storeIdentifier, previous: previous)
    }

    func fail(_ error: LoomError) { self.error = error }

    func finish() {}
}

extension LiveResultsObserver where SectionKey == NoSection {
    /// Observes the objects matching `request` in `context`, in one section. See
    /// ``init(_:sectionedBy:observing:in:)``.
    public convenience init(
        _ request: FetchRequest<Model>, observing: [any PartialKeyPath<Model> & Sendable]? = nil, in context: ManagedObjectContext
    ) throws(LoomError) {
        try self.init(request, sectionKeyPath: nil, observing: observing, in: context)
    }
}
