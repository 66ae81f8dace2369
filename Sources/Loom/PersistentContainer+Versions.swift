public import Foundation
@_spi(LoomStore) public import LoomCore
@_spi(LoomStore) public import LoomSQLite

extension PersistentContainer {
    /// Opens a container with the current version of a versioned model, migrating a store saved
    /// by an earlier version through `migrationPlan`'s stages first (SwiftData's
    /// `ModelContainer(for:migrationPlan:)`).
    ///
    /// ```swift
    /// let container = try await PersistentContainer(name: "Library", for: LibraryV2.self, migrationPlan: LibraryPlan.self)
    /// ```
    ///
    /// Without a plan, a store saved by an older model is migrated by inference when it can be
    /// (as ``init(name:for:location:options:)`` does). The in-memory store starts empty every
    /// time: it has nothing to migrate. Several processes or containers opening the same
    /// outdated store at once take turns: one migrates, the others then open the migrated store.
    /// Call from any isolation; it suspends while a migration runs (or another process's).
    ///
    /// - Parameters:
    ///   - name: the store's name, which names its file in the default location.
    ///   - version: the current version of the model.
    ///   - migrationPlan: the versions and stages a store saved by an earlier version goes through.
    ///   - location: where the store is (``StoreLocation``).
    ///   - options: how the SQLite store is opened.
    ///   - progress: called with each step of a migration, on the migrating task.
    /// - Throws: `LoomError/Code/invalidMigrationPlan` for a malformed plan,
    ///   `LoomError/Code/unknownSchemaVersion` for a store saved by no version of the plan (both
    ///   before the file is touched), `LoomError/Code/schemaMismatch` and
    ///   `LoomError/Code/migrationFailed` from a stage's change of tables, or for a stage that
    ///   would drop an entity or attribute still holding data without `allowsDataLoss` (that
    ///   stage changes nothing, the file byte for byte), what a custom stage's closure throws, and the errors of
    ///   `SQLiteStore/init(url:schema:options:)`. After a failure, the stages done stay done.
    public convenience init(
        name: String, for version: any VersionedSchema.Type, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
        location: StoreLocation = .defaultFile, options: SQLiteStore.Options = SQLiteStore.Options(),
        progress: (@Sendable (MigrationProgress) -> Void)? = nil
    ) async throws {
        let store: any PersistentStore
        switch location {
        case .inMemory:
            let versions = try MigrationPlanRunner.validate(plan: migrationPlan, current: version)
            store = InMemoryStore(schema: versions[versions.count - 1].schema)
        case .file(let url):
            store = try await MigrationPlanRunner.open(SQLiteStore.Location(url: url, options: options), current: version, plan: migrationPlan, progress: progress)
        case .defaultFile:
            let url = try Self.defaultStoreURL(name: name)
            store = try await MigrationPlanRunner.open(SQLiteStore.Location(url: url, options: options), current: version, plan: migrationPlan, progress: progress)
        }
        self.init(store: store)
    }

    /// Starts opening a container as ``init(name:for:migrationPlan:location:options:progress:)``
    /// does, and hands back its progress as an `AsyncSequence` and the container when it is open.
    ///
    /// ```swift
    /// let opening = PersistentContainer.opening(name: "Library", for: LibraryV2.self, migrationPlan: LibraryPlan.self)
    /// for await step in opening.progress { print(step) }   // ends when the container is open
    /// let container = try await opening.container
    /// ```
    public static func opening(
        name: String, for version: any VersionedSchema.Type, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
        location: StoreLocation = .defaultFile, options: SQLiteStore.Options = SQLiteStore.Options()
    ) -> ContainerOpening {
        let (progress, continuation) = AsyncStream.makeStream(of: MigrationProgress.self, bufferingPolicy: .unbounded)
        let task = Task {
            defer { continuation.finish() }
            return try await PersistentContainer(
                name: name, for: version, migrationPlan: migrationPlan, location: location, options: options,
                progress: { continuation.yield($0) })
        }
        return ContainerOpening(progress: progress, task: task)
    }

    /// Which stages opening the store at `url` with `version` and `migrationPlan` would run, by
    /// name (`MigrationStage/name`), read without changing the file: empty when the store is up
    /// to date or does not exist.
    ///
    /// - Throws: `LoomError/Code/invalidMigrationPlan`, `LoomError/Code/unknownSchemaVersion`,
    ///   and, without a plan, `LoomError/Code/schemaMismatch` for a change that cannot be
    ///   inferred.
    public static func requiredMigrationStages(
        forStoreAt url: URL, version: any VersionedSchema.Type, migrationPlan: (any SchemaMigrationPlan.Type)? = nil
    ) throws(LoomError) -> [String] {
        try MigrationPlanRunner.requiredStages(SQLiteStore.Location(url: url), current: version, plan: migrationPlan)
    }
}

/// A container being opened (and its store migrated): see
/// `PersistentContainer/opening(name:for:migrationPlan:location:options:)`. `Sendable`.
public struct ContainerOpening: Sendable {
    /// Each step of the migration, ending when the container is open or opening failed (empty
    /// when nothing needed migrating).
    public let progress: AsyncStream<MigrationProgress>
    let task: Task<PersistentContainer, any Error>

    /// The open container, or the error that stopped it opening.
    public var container: PersistentContainer {
        get async throws { try await task.value }
    }
}
