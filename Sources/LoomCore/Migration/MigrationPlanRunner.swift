import Foundation

/// What a store keeps about its model version, read without changing the file.
@_spi(LoomStore) public struct SavedStoreState: Sendable {
    /// The schema the store was last saved with.
    public var record: SchemaRecord
    /// The store's own key/value metadata (`versionIdentifier`, `migrationStep`).
    public var metadata: [String: String]

    public init(record: SchemaRecord, metadata: [String: String]) {
        self.record = record
        self.metadata = metadata
    }
}

/// What a store reports while it changes its tables: the entity, its rows copied and in all, and
/// the fraction of the whole change of tables done.
@_spi(LoomStore) public typealias TableMigrationProgress = @Sendable (_ entity: String, _ done: Int, _ total: Int, _ fraction: Double) -> Void

/// A store file a ``MigrationPlanRunner`` opens and migrates: what each store kind provides for
/// versioned opening. SQLite: `SQLiteStore.Location`.
@_spi(LoomStore) public protocol MigratableStoreLocation: Sendable {
    /// Names the store in messages (a file path, a database URL).
    var path: String { get }
    /// The saved schema and metadata, without changing anything; `nil` when there is no store
    /// yet.
    func savedState() throws(LoomError) -> SavedStoreState?
    /// Opens the store with `schema`, creating it, or migrating it by inference
    /// (``SchemaMigration``) when it was saved with another schema, in one transaction that also
    /// writes `metadata` (a `nil` value removes its key), reporting the tables it rebuilds to
    /// `progress` as they fill.
    func open(schema: Schema, metadata: [String: String?], progress: TableMigrationProgress?) throws(LoomError) -> any PersistentStore
    /// Counts the objects each query matches in the store as it is saved, read with `schema`
    /// (the version it was saved with), without changing anything.
    func counts(_ queries: [StoreQuery], savedWith schema: Schema) throws(LoomError) -> [Int]
    /// Writes one metadata value inside `store`'s write transaction open on this thread, so
    /// that it commits with the transaction's saves.
    func setMetadata(_ value: String?, forKey key: String, in store: any PersistentStore) throws(LoomError)
    /// Runs `body` while no other process or container migrates this store.
    func withMigrationLock<T: Sendable>(_ body: () async throws -> T) async throws -> T
    /// Makes a consistent copy of the store as it is now, for a transform stage to read the old
    /// version from, replacing any earlier copy, and returns where it is.
    func makeSnapshot() throws(LoomError) -> any MigratableStoreLocation
    /// The copy ``makeSnapshot()`` made, if it is there.
    var snapshot: (any MigratableStoreLocation)? { get }
    /// Removes the copy, once the stage that read it has ended.
    func removeSnapshot()
}

/// Where a migration is, as it runs: reported to the closure given to
/// `MigrationPlanRunner/open(_:current:plan:progress:)` and, from the Loom module, as an
/// `AsyncSequence`.
public struct MigrationProgress: Sendable, Equatable, CustomStringConvertible {
    /// The stage running (``MigrationStage/name``).
    public var stage: String
    /// What the stage is doing: `"willMigrate"`, `"copy"`, `"tables"`, `"didMigrate"`,
    /// `"transform"` (once per chunk), or `"done"`.
    public var step: String
    /// Stages finished, and how many the store needs in all.
    public var stagesDone: Int
    public var stageCount: Int
    /// Of the whole migration, 0…1.
    public var fractionCompleted: Double
    /// In a transform stage: the entity transformed, and its objects done and in all.
    public var entity: String?
    public var objectsDone: Int?
    public var objectCount: Int?

    public init(
        stage: String, step: String, stagesDone: Int, stageCount: Int, fractionCompleted: Double,
        entity: String? = nil, objectsDone: Int? = nil, objectCount: Int? = nil
    ) {
        self.stage = stage
        self.step = step
        self.stagesDone = stagesDone
        self.stageCount = stageCount
        self.fractionCompleted = fractionCompleted
        self.entity = entity
        self.objectsDone = objectsDone
        self.objectCount = objectCount
    }

    public var description: String {
        let objects = entity.map { " \($0) \(objectsDone ?? 0)/\(objectCount ?? 0)" } ?? ""
        return "\(stage): \(step)\(objects) (\(stagesDone)/\(stageCount) stages, \(Int((fractionCompleted * 100).rounded()))%)"
    }
}

/// Opens a store with a model version and, when it was saved by an earlier one, migrates it
/// through a ``SchemaMigrationPlan``'s stages. Store-independent: a store kind supplies a
/// ``MigratableStoreLocation``.
///
/// Each step commits on its own and records itself in the store's metadata in the same
/// transaction: a custom stage's `willMigrate` (its saves and "willMigrate done"), the inferred
/// change of tables (the new version, and "didMigrate pending" when there is one), `didMigrate`
/// (its saves, and the step cleared). A process killed at any instant leaves the store at the end
/// of a step, and the next open resumes from there.
@_spi(LoomStore) public enum MigrationPlanRunner {
    /// One version of a plan, with its schema.
    public struct Version: Sendable {
        public var identifier: Schema.Version
        public var schema: Schema
        public var hash: String
    }

    /// The metadata key of the version identifier, and of the step in progress.
    public static let versionKey = "versionIdentifier"
    public static let stepKey = "migrationStep"

    /// A step done in the middle of a stage, as saved in the store's metadata.
    struct Step: Codable, Equatable {
        enum State: String, Codable { case willMigrateDone, didMigratePending, transforming }
        var from: Schema.Version
        var to: Schema.Version
        var state: State
        /// While transforming: the primary key of the last object whose chunk committed.
        var cursor: Int64?

        /// As saved in `loom_metadata`. (Encoding two versions, a state and an integer cannot fail.)
        var text: String { (try? JSONEncoder().encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "" }
        init(from: Schema.Version, to: Schema.Version, state: State, cursor: Int64? = nil) {
            self.from = from
            self.to = to
            self.state = state
            self.cursor = cursor
        }
        init?(_ text: String?) {
            guard let text, let step = try? JSONDecoder().decode(Step.self, from: Data(text.utf8)) else { return nil }
            self = step
        }
    }

    /// Checks a plan against the version a container opens with, and returns its versions.
    ///
    /// - Throws: ``LoomError/Code/invalidMigrationPlan`` naming the fault; ``LoomError/Code/invalidModel``
    ///   when a version's models are not a valid schema.
    public static func validate(plan: (any SchemaMigrationPlan.Type)?, current: any VersionedSchema.Type) throws(LoomError) -> [Version] {
        func version(_ type: any VersionedSchema.Type) throws(LoomError) -> Version {
            let schema: Schema
            do {
                schema = try Schema(versionedSchema: type)
            } catch {
                throw LoomError(.invalidModel, "Version \(type.versionIdentifier) (\(type)): \(error.message)", underlying: error)
            }
            return Version(identifier: type.versionIdentifier, schema: schema, hash: schema.versionHash)
        }
        guard let plan else { return [try version(current)] }
        func refuse(_ fault: String) -> LoomError {
            LoomError(.invalidMigrationPlan, "The migration plan \(plan) is invalid: \(fault). Nothing was opened or changed.")
        }
        let schemas = plan.schemas
        guard let last = schemas.last else { throw refuse("its schemas list is empty") }
        var versions: [Version] = []
        for type in schemas {
            let next = try version(type)
            if let twin = versions.first(where: { $0.identifier == next.identifier }) {
                throw refuse("version \(twin.identifier) is listed twice in schemas")
            }
            if let twin = versions.first(where: { $0.hash == next.hash }) {
                throw refuse("versions \(twin.identifier) and \(next.identifier) have the same model (version hash \(next.hash)), so a store saved by either cannot be told apart")
            }
            versions.append(next)
        }
        guard ObjectIdentifier(last) == ObjectIdentifier(current) else {
            throw refuse("its last version is \(last.versionIdentifier) (\(last)), but the container opens with \(current.versionIdentifier) (\(current)); list the current version last")
        }
        func index(_ type: any VersionedSchema.Type, _ n: Int) throws(LoomError) -> Int {
            guard let i = schemas.firstIndex(where: { ObjectIdentifier($0) == ObjectIdentifier(type) }) else {
                throw refuse("stage \(n + 1) uses version \(type.versionIdentifier) (\(type)), which is not in schemas")
            }
            return i
        }
        let stages = plan.stages
        for (n, stage) in stages.enumerated() {
            let from = try index(stage.fromVersion, n), to = try index(stage.toVersion, n)
            if from == to { throw refuse("stage \(n + 1) (\(stage.name)) goes from a version to itself") }
            if to < from { throw refuse("stage \(n + 1) (\(stage.name)) goes back to an earlier version") }
            if from < n { throw refuse("stage \(n + 1) (\(stage.name)) repeats version \(versions[from].identifier), which stage \(from + 1) starts from") }
            if from > n { throw refuse("the stages skip version \(versions[n].identifier): stage \(n + 1) starts at \(versions[from].identifier)") }
            if to > from + 1 { throw refuse("stage \(n + 1) (\(stage.name)) skips version \(versions[from + 1].identifier)") }
        }
        if stages.count < versions.count - 1 {
            throw refuse("its stages end at version \(versions[stages.count].identifier), not at the current version \(current.versionIdentifier); add a stage from each version to the next")
        }
        return versions
    }

    /// Opens the store at `location` with the `current` version, migrating it through `plan`'s
    /// stages (or, without a plan, by inference) when it was saved by an earlier version.
    ///
    /// - Throws: ``LoomError/Code/invalidMigrationPlan``, ``LoomError/Code/unknownSchemaVersion``
    ///   (nothing changed), the store's open and migration errors, and what a custom stage's
    ///   closure throws (the steps before it stay done).
    public static func open(
        _ location: any MigratableStoreLocation, current: any VersionedSchema.Type, plan: (any SchemaMigrationPlan.Type)?,
        progress: (@Sendable (MigrationProgress) -> Void)? = nil
    ) async throws -> any PersistentStore {
        let versions = try validate(plan: plan, current: current)
        let latest = versions[versions.count - 1]
        let finish: [String: String?] = [versionKey: latest.identifier.description, stepKey: nil]
        guard let plan else {
            let name = "lightweight (inferred) → \(latest.identifier)"
            return try location.open(schema: latest.schema, metadata: finish, progress: tables(name, stagesDone: 0, stageCount: 1, from: 0, to: 1, progress))
        }
        // Up to date: open without waiting for the migration lock (unless a process killed
        // between a transform's last chunk and the removal of its copy left the copy behind).
        let state = try location.savedState()
        if state == nil || (state?.record.versionHash == latest.hash && state?.metadata[stepKey] == nil && location.snapshot == nil) {
            return try location.open(schema: latest.schema, metadata: finish, progress: nil)
        }
        let stages = plan.stages
        return try await location.withMigrationLock { () async throws -> any PersistentStore in
            var stagesDone = 0, stageCount = 0
            func report(_ stage: MigrationStage, _ step: String, within: Double) {
                guard let progress else { return }
                let fraction = stageCount == 0 ? 1 : (Double(stagesDone) + within) / Double(stageCount)
                progress(MigrationProgress(stage: stage.name, step: step, stagesDone: stagesDone, stageCount: stageCount, fractionCompleted: min(1, fraction)))
            }
            while true {
                guard let state = try location.savedState() else {
                    return try location.open(schema: latest.schema, metadata: finish, progress: nil)
                }
                guard let k = versions.firstIndex(where: { $0.hash == state.record.versionHash }) else {
                    throw unknownVersion(state.record, versions, path: location.path)
                }
                let step = Step(state.metadata[stepKey])
                if stageCount == 0 {
                    // A stage left half-done (a pending didMigrate or transform) counts too.
                    let resumes = step.map { $0.to == versions[k].identifier && $0.state != .willMigrateDone } ?? false
                    stageCount = versions.count - 1 - k + (resumes ? 1 : 0)
                }
                if let step, step.state == .didMigratePending, step.to == versions[k].identifier, k > 0,
                   case .custom(_, _, _, let didMigrate?, _) = stages[k - 1] {
                    report(stages[k - 1], "didMigrate", within: 0.6)
                    try await run(didMigrate, on: location, schema: versions[k].schema, marking: nil)
                    stagesDone += 1
                    report(stages[k - 1], "done", within: 0)
                    continue
                }
                if let step, step.state == .transforming, step.to == versions[k].identifier, k > 0,
                   case .transform(_, _, let transform) = stages[k - 1] {
                    let stage = stages[k - 1], finished = stagesDone, count = stageCount
                    try await runTransform(transform, on: location, from: versions[k - 1], to: versions[k], after: step.cursor ?? 0) { done, total in
                        let within = 0.2 + 0.8 * (total == 0 ? 1 : Double(done) / Double(total))
                        progress?(MigrationProgress(
                            stage: stage.name, step: "transform", stagesDone: finished, stageCount: count,
                            fractionCompleted: min(1, (Double(finished) + within) / Double(max(1, count))),
                            entity: transform.entityName, objectsDone: done, objectCount: total))
                    }
                    stagesDone += 1
                    report(stage, "done", within: 0)
                    continue
                }
                if k == versions.count - 1 {
                    // Holding the lock, no other process is copying the store for a transform:
                    // a copy left here belongs to a transform that finished.
                    if step == nil { location.removeSnapshot() }
                    return try location.open(schema: latest.schema, metadata: finish, progress: nil)
                }
                let stage = stages[k], from = versions[k], to = versions[k + 1]
                if case .transform = stage {
                    // Refuse to drop objects nobody sees, copy the old version for the transform to
                    // read, then change the tables and mark the transform begun, in one transaction.
                    try refuseDataLoss(stage, saved: state.record, from: from, to: to, on: location)
                    report(stage, "copy", within: 0)
                    _ = try location.makeSnapshot()
                    report(stage, "tables", within: 0.1)
                    let marker = Step(from: from.identifier, to: to.identifier, state: .transforming, cursor: 0).text
                    let migrated: any PersistentStore
                    do {
                        migrated = try location.open(
                            schema: to.schema, metadata: [versionKey: to.identifier.description, stepKey: marker],
                            progress: tables(stage.name, stagesDone: stagesDone, stageCount: stageCount, from: 0.1, to: 0.2, progress))
                    } catch {
                        // The copy goes only while the store is still the old version: an open
                        // whose migration committed before a later step of it failed (an I/O
                        // error) leaves the store marked as transforming, which the next open
                        // resumes from this copy.
                        if let saved = try? location.savedState(), saved.record.versionHash == from.hash { location.removeSnapshot() }
                        throw error
                    }
                    try migrated.close()
                    continue
                }
                // Before any step of the stage, so that a refusal leaves the store as it was.
                try refuseDataLoss(stage, saved: state.record, from: from, to: to, on: location)
                var didMigrate: (@Sendable (ManagedObjectContext) throws -> Void)?
                if case .custom(_, _, let will, let did, _) = stage {
                    didMigrate = did
                    let willDone = step == Step(from: from.identifier, to: to.identifier, state: .willMigrateDone)
                    if let will, !willDone {
                        report(stage, "willMigrate", within: 0)
                        try await run(will, on: location, schema: from.schema, marking: Step(from: from.identifier, to: to.identifier, state: .willMigrateDone))
                    }
                }
                report(stage, "tables", within: 0.3)
                let pending = didMigrate.map { _ in Step(from: from.identifier, to: to.identifier, state: .didMigratePending).text }
                let span: (Double, Double) = if case .lightweight = stage { (0.3, 1) } else { (0.3, 0.6) }
                let store = try location.open(
                    schema: to.schema, metadata: [versionKey: to.identifier.description, stepKey: pending],
                    progress: tables(stage.name, stagesDone: stagesDone, stageCount: stageCount, from: span.0, to: span.1, progress))
                if didMigrate == nil {
                    stagesDone += 1
                    report(stage, "done", within: 0)
                    if k + 1 == versions.count - 1 { return store }
                }
                try store.close()
            }
        }
    }

    /// Turns a store's report on its tables into ``MigrationProgress`` for the stage, the tables
    /// step spanning `from`…`to` of it.
    static func tables(
        _ stage: String, stagesDone: Int, stageCount: Int, from: Double, to: Double, _ progress: (@Sendable (MigrationProgress) -> Void)?
    ) -> TableMigrationProgress? {
        guard let progress else { return nil }
        return { entity, done, total, fraction in
            let within = from + (to - from) * fraction
            progress(MigrationProgress(
                stage: stage, step: "tables", stagesDone: stagesDone, stageCount: stageCount,
                fractionCompleted: min(1, (Double(stagesDone) + within) / Double(max(1, stageCount))),
                entity: entity, objectsDone: done, objectCount: total))
        }
    }

    /// The stages opening the store at `location` with `current` would run, by name, without
    /// changing anything: empty when it is up to date or does not exist.
    public static func requiredStages(
        _ location: any MigratableStoreLocation, current: any VersionedSchema.Type, plan: (any SchemaMigrationPlan.Type)?
    ) throws(LoomError) -> [String] {
        let versions = try validate(plan: plan, current: current)
        let latest = versions[versions.count - 1]
        guard let state = try location.savedState() else { return [] }
        guard let plan else {
            if state.record.versionHash == latest.hash { return [] }
            let migration = try SchemaMigration.infer(from: state.record, to: latest.schema, path: location.path)
            return ["lightweight (inferred) → \(latest.identifier): " + migration.summary.joined(separator: ", ")]
        }
        guard let k = versions.firstIndex(where: { $0.hash == state.record.versionHash }) else {
            throw unknownVersion(state.record, versions, path: location.path)
        }
        var names: [String] = []
        if let step = Step(state.metadata[stepKey]), step.to == versions[k].identifier, k > 0 {
            switch step.state {
            case .didMigratePending: names.append("\(plan.stages[k - 1].name) (didMigrate)")
            case .transforming: names.append("\(plan.stages[k - 1].name) (resumed after \(plan.stages[k - 1].fromVersion.versionIdentifier)'s key \(step.cursor ?? 0))")
            case .willMigrateDone: break
            }
        }
        return names + plan.stages[k...].map(\.name)
    }

    /// The error for a store saved by none of the plan's versions: the nearest one (fewest
    /// differences) and what differs from it.
    static func unknownVersion(_ saved: SchemaRecord, _ versions: [Version], path: String) -> LoomError {
        let ranked = versions.map { ($0, saved.differences(from: $0.schema.record)) }
        let nearest = ranked.min { $0.1.count < $1.1.count }!
        return LoomError(
            .unknownSchemaVersion,
            "The store at \(path) was saved with a model that is none of the migration plan's versions (\(versions.map(\.identifier.description).joined(separator: ", "))). The nearest is \(nearest.0.identifier), which differs in \(nearest.1.count) way\(nearest.1.count == 1 ? "" : "s"): \(nearest.1.joined(separator: "; ")). Add the store's version to the plan. The store was not changed.",
            path: path)
    }

    /// Runs one closure of a custom stage on a container of `schema`, in one write transaction
    /// that saves its changes and writes `marking` as the step in progress.
    static func run(
        _ body: @escaping @Sendable (ManagedObjectContext) throws -> Void, on location: any MigratableStoreLocation, schema: Schema, marking step: Step?
    ) async throws {
        let store = try location.open(schema: schema, metadata: [:], progress: nil)
        let container = PersistentContainer(store: store)
        do {
            let text = step?.text
            try await container.performExclusiveWrite { context in
                try body(context)
                try location.setMetadata(text, forKey: stepKey, in: store)
            }
        } catch {
            try? await container.close()
            throw error
        }
        try await container.close()
    }

    /// Throws, unless the stage says `allowsDataLoss`, when it would drop saved data: an entity
    /// that still holds objects, or an attribute of an entity the new version keeps that still
    /// holds values (a transform stage's own entity excepted: its transform reads them). Reads
    /// the store without changing it.
    static func refuseDataLoss(
        _ stage: MigrationStage, saved: SchemaRecord, from: Version, to: Version, on location: any MigratableStoreLocation
    ) throws(LoomError) {
        if stage.allowsDataLoss { return }
        let transformed: String? = if case .transform(_, _, let transform) = stage { transform.entityName } else { nil }
        let unseen = transformed.map { " that its transform (of \($0)) does not see" } ?? ""
        let migration = try SchemaMigration.infer(from: saved, to: to.schema, path: location.path)
        // What would go, as a query for what it holds and the message saying so.
        var drops: [(query: StoreQuery, what: String, things: String, entity: String, attribute: String?)] = []
        for change in migration.tables {
            guard case .drop(let name) = change, name != transformed, let entity = from.schema.entity(named: name) else { continue }
            drops.append((StoreQuery(entity: entity), "entity \(name)", "object", name, nil))
        }
        for (name, attribute) in migration.droppedAttributes where name != transformed {
            guard let entity = from.schema.entity(named: name), let index = entity.attributeIndex(named: attribute) else { continue }
            let holding = PredicateNode.compare(.notEqual, .attribute(index), .constant(.null))
            drops.append((StoreQuery(entity: entity, predicate: holding), "attribute \(name).\(attribute)", "value", name, attribute))
        }
        guard !drops.isEmpty else { return }
        let counts = try location.counts(drops.map(\.query), savedWith: from.schema)
        guard let (drop, count) = zip(drops, counts).first(where: { $0.1 > 0 }) else { return }
        throw LoomError(
            .migrationFailed,
            "The stage \(stage.name) drops \(drop.what), which holds \(count) \(drop.things)\(count == 1 ? "" : "s")\(unseen). Keep it in the new version, or pass allowsDataLoss: true if they may go. The store was not changed.",
            entity: drop.entity, attributes: drop.attribute.map { [$0] } ?? [], path: location.path)
    }

    /// Runs a transform stage's chunks after `cursor`, each in one transaction with the cursor
    /// it reaches, then ends the stage and removes the copy of the old version.
    static func runTransform(
        _ transform: MigrationTransform, on location: any MigratableStoreLocation, from: Version, to: Version, after cursor: Int64,
        progress: @escaping @Sendable (_ done: Int, _ total: Int) -> Void
    ) async throws {
        guard let snapshot = location.snapshot else {
            throw LoomError(
                .migrationFailed,
                "The store at \(location.path) is in the middle of the transform from \(from.identifier) to \(to.identifier), but the copy of version \(from.identifier) it reads from is gone (\(location.path)-migration-source). Restore the store from a backup.",
                path: location.path)
        }
        guard let entity = from.schema.entity(named: transform.entityName) else {
            throw LoomError(.unknownEntity, "The transform from \(from.identifier) to \(to.identifier) reads entity \(transform.entityName), which version \(from.identifier) does not have.", entity: transform.entityName)
        }
        let old = try snapshot.open(schema: from.schema, metadata: [:], progress: nil)
        let new: any PersistentStore
        do {
            new = try location.open(schema: to.schema, metadata: [:], progress: nil)
        } catch {
            try? old.close()
            throw error
        }
        defer {
            try? old.close()
            try? new.close()
        }
        let queue = ContextQueue(label: "Loom migration \(from.identifier) → \(to.identifier)")
        let _: Void = try await withCheckedThrowingContinuation { continuation in
            queue.queue.async {
                continuation.resume(with: Result { () throws -> Void in
                    try RunningBodies.run(as: queue.domain) { () throws -> Void in
                        try transformChunks(transform, entity: entity, old: old, new: new, queue: queue, from: from, to: to, after: cursor, location: location, progress: progress)
                    }
                })
            }
        }
        location.removeSnapshot()
    }

    /// ``runTransform(_:on:from:to:after:progress:)`` on its queue.
    private static func transformChunks(
        _ transform: MigrationTransform, entity: EntityDescription, old: any PersistentStore, new: any PersistentStore, queue: ContextQueue,
        from: Version, to: Version, after start: Int64, location: any MigratableStoreLocation, progress: @Sendable (Int, Int) -> Void
    ) throws {
        // Small row caches: a chunk's rows are not needed after it.
        let oldCoordinator = PersistentStoreCoordinator(store: old, rowCacheLimit: transform.chunkSize)
        let newCoordinator = PersistentStoreCoordinator(store: new, rowCacheLimit: transform.chunkSize)
        let oldContext = ManagedObjectContext(coordinator: oldCoordinator, isolation: .queue(queue), name: "migration: \(from.identifier), read-only")
        let newContext = ManagedObjectContext(coordinator: newCoordinator, isolation: .queue(queue), name: "migration: \(to.identifier)")
        let after = { (key: Int64) in PredicateNode.compare(.greater, .primaryKey, .constant(.integer(key))) }
        let total = try old.count(StoreQuery(entity: entity))
        var done = total - (try old.count(StoreQuery(entity: entity, predicate: after(start))))
        var cursor = start
        progress(done, total)
        while true {
            let objects = try oldContext.fetchObjects(StoreQuery(entity: entity, predicate: after(cursor), fetchLimit: transform.chunkSize), includesPendingChanges: false, asFaults: false)
            guard let last = objects.last?._loomBacking.key else { break }
            do {
                _ = try newCoordinator.write(.exclusive) {
                    try transform.body(objects, oldContext, newContext)
                    let step = Step(from: from.identifier, to: to.identifier, state: .transforming, cursor: last)
                    try location.setMetadata(step.text, forKey: stepKey, in: new)
                    try newContext.save()
                }
            } catch {
                newContext.rollback()
                throw error
            }
            cursor = last
            done += objects.count
            oldContext.reset()
            newContext.reset()
            progress(done, total)
        }
        _ = try newCoordinator.write(.exclusive) { try location.setMetadata(nil, forKey: stepKey, in: new) }
    }
}
