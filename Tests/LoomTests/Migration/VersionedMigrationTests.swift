import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Synchronization
import Testing

/// Counts its steps, and fails `didMigrate` while `failing` is set.
enum FlakyShelfPlan: SchemaMigrationPlan {
    static let willMigrateRuns = Mutex(0)
    static let didMigrateRuns = Mutex(0)
    static let failing = Mutex(true)
    struct Failure: Error {}

    static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfV2.self, ShelfV3.self] }
    static var stages: [MigrationStage] {
        [
            .lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV2.self),
            .custom(
                fromVersion: ShelfV2.self, toVersion: ShelfV3.self,
                willMigrate: { context in
                    willMigrateRuns.withLock { $0 += 1 }
                    try ShelfStage.removeDuplicates(context)
                },
                didMigrate: { context in
                    didMigrateRuns.withLock { $0 += 1 }
                    try ShelfStage.fillPages(context)
                    if failing.withLock({ $0 }) { throw Failure() }
                }),
        ]
    }
}

/// Plans that are wrong, each in one way.
enum BrokenPlans {
    enum SkipsAVersion: SchemaMigrationPlan {
        static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfV2.self, ShelfV3.self] }
        static var stages: [MigrationStage] { [.lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV3.self)] }
    }
    enum RepeatsAVersion: SchemaMigrationPlan {
        static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfV2.self, ShelfV3.self] }
        static var stages: [MigrationStage] {
            [.lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV2.self), .lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV2.self)]
        }
    }
    enum EndsEarly: SchemaMigrationPlan {
        static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfV2.self, ShelfV3.self] }
        static var stages: [MigrationStage] { [.lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV2.self)] }
    }
    enum NotEndingAtCurrent: SchemaMigrationPlan {
        static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfV2.self] }
        static var stages: [MigrationStage] { [.lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV2.self)] }
    }
    /// V2 again under another identifier: the same model twice.
    enum ShelfV2Again: VersionedSchema {
        static let versionIdentifier = Schema.Version(2, 1, 0)
        static var models: [any PersistentModel.Type] { ShelfV2.models }
    }
    enum SameModelTwice: SchemaMigrationPlan {
        static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfV2.self, ShelfV2Again.self, ShelfV3.self] }
        static var stages: [MigrationStage] {
            [
                .lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV2.self),
                .lightweight(fromVersion: ShelfV2.self, toVersion: ShelfV2Again.self),
                .lightweight(fromVersion: ShelfV2Again.self, toVersion: ShelfV3.self),
            ]
        }
    }
}

@Suite("Versioned schemas and migration plans", .timeLimit(.minutes(5)))
struct VersionedMigrationTests {
    static func storeURL() -> URL { TemporaryDirectory.make().appending(path: "shelf.loom") }

    /// A V1 store of `count` books; every tenth shares its title with the one before.
    static func makeV1Store(at url: URL, count: Int = 30) async throws {
        try await fillV1(try await PersistentContainer(name: "shelf", for: ShelfV1.self, location: .file(url)), count: count)
    }

    /// Saves `count` V1 books into `container` (every tenth sharing its title with the one
    /// before), and closes it.
    static func fillV1(_ container: PersistentContainer, count: Int = 30) async throws {
        try await container.save { context in
            for i in 0..<count {
                let title = i % 10 == 9 ? "Book \(i - 1)" : "Book \(i)"
                context.insert(ShelfV1.Book(title: title, number: i, author: i % 3 == 0 ? "Author \(i % 7)" : nil))
            }
        }
        try await container.close()
    }

    /// A progress report as one line: stage, step, entity and objects, stages done.
    static func line(_ progress: MigrationProgress) -> String {
        let objects = progress.entity.map { " \($0) \(progress.objectsDone ?? -1)/\(progress.objectCount ?? -1)" } ?? ""
        return "\(progress.stage): \(progress.step)\(objects) \(progress.stagesDone)/\(progress.stageCount)"
    }

    /// What ``ShelfPlan`` reports migrating ``fillV1(_:count:)``'s 30 books.
    static let shelfPlanSteps = [
        "lightweight 1.0.0 → 2.0.0: tables 0/2", "lightweight 1.0.0 → 2.0.0: done 1/2",
        "custom 2.0.0 → 3.0.0: willMigrate 1/2", "custom 2.0.0 → 3.0.0: tables 1/2",
        // Book is rebuilt (its name becomes unique): its rows copied, as reported.
        "custom 2.0.0 → 3.0.0: tables Book 0/27 1/2", "custom 2.0.0 → 3.0.0: tables Book 27/27 1/2",
        "custom 2.0.0 → 3.0.0: didMigrate 1/2", "custom 2.0.0 → 3.0.0: done 2/2",
    ]

    static func books(_ container: PersistentContainer) async throws -> [String] {
        try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<ShelfV3.Book>(sortBy: [SortDescriptor(\.number)])).map { "\($0.name)|\($0.number)|\($0.pages)" }
        }
    }

    @Test("A V1 store opens with V3 through the plan: renamed, duplicates removed before the uniqueness, pages filled after, the version saved")
    func migratesThroughTheStages() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let steps = Mutex<[String]>([])
        let container = try await PersistentContainer(
            name: "shelf", for: ShelfV3.self, migrationPlan: ShelfPlan.self, location: .file(url),
            progress: { progress in steps.withLock { $0.append(Self.line(progress)) } })
        let books = try await Self.books(container)
        #expect(books.count == 27)
        #expect(books.first == "Book 0|0|1")
        #expect(!books.contains { $0.hasSuffix("|9|10") })   // "Book 8" number 9: a duplicate, removed
        #expect(books.contains("Book 8|8|9"))
        let shelves = try await container.performBackgroundTask { try $0.fetch(FetchRequest<ShelfV3.Shelf>()).map(\.label) }
        #expect(shelves == ["migrated"])
        try await container.close()
        #expect(steps.withLock { $0 } == Self.shelfPlanSteps)
        let state = try SQLiteStore.savedState(at: url)
        #expect(state.metadata["versionIdentifier"] == "3.0.0")
        #expect(state.metadata["migrationStep"] == nil)
        #expect(state.record.versionHash == (try Schema(versionedSchema: ShelfV3.self)).versionHash)
        // Reopened: nothing to do, nothing run again.
        let reopened = try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: ShelfPlan.self, location: .file(url))
        #expect(try await Self.books(reopened) == books)
        #expect(try await reopened.performBackgroundTask { try $0.count(for: FetchRequest<ShelfV3.Shelf>()) } == 1)
        try await reopened.close()
    }

    @Test("A V2 store runs only the last stage; the progress sequence ends when the container is open")
    func startsFromTheSavedVersion() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let v2 = try await PersistentContainer(name: "shelf", for: ShelfV2.self, location: .file(url))   // inferred, no plan
        try await v2.close()
        #expect(try SQLiteStore.savedState(at: url).metadata["versionIdentifier"] == "2.0.0")
        let opening = PersistentContainer.opening(name: "shelf", for: ShelfV3.self, migrationPlan: ShelfPlan.self, location: .file(url))
        var seen: [MigrationProgress] = []
        for await progress in opening.progress { seen.append(progress) }
        let container = try await opening.container
        #expect(seen.map(\.stage).allSatisfy { $0 == "custom 2.0.0 → 3.0.0" })
        #expect(seen.map(\.step) == ["willMigrate", "tables", "tables", "tables", "didMigrate", "done"])
        #expect(seen.last?.fractionCompleted == 1)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.fractionCompleted <= $1.fractionCompleted })
        #expect(try await Self.books(container).count == 27)
        try await container.close()
    }

    @Test("The forecast names the stages that would run, and changes nothing")
    func forecast() async throws {
        let url = Self.storeURL()
        #expect(try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: ShelfV3.self, migrationPlan: ShelfPlan.self) == [])
        try await Self.makeV1Store(at: url)
        let before = try SQLiteStore.contentDump(at: url)
        #expect(try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: ShelfV3.self, migrationPlan: ShelfPlan.self)
            == ["lightweight 1.0.0 → 2.0.0", "custom 2.0.0 → 3.0.0"])
        let inferred = try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: ShelfV2.self)
        #expect(inferred.count == 1)
        #expect(inferred.first?.contains("rename Book.title to name") == true)
        #expect(try SQLiteStore.contentDump(at: url) == before)
    }

    @Test("A didMigrate that throws leaves the tables migrated and resumes at didMigrate; willMigrate never runs twice")
    func resumesAfterAFailedStep() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        FlakyShelfPlan.failing.withLock { $0 = true }
        await #expect(throws: FlakyShelfPlan.Failure.self) {
            _ = try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: FlakyShelfPlan.self, location: .file(url))
        }
        let state = try SQLiteStore.savedState(at: url)
        #expect(state.metadata["versionIdentifier"] == "3.0.0")
        #expect(state.metadata["migrationStep"]?.contains("didMigratePending") == true)
        #expect(try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: ShelfV3.self, migrationPlan: FlakyShelfPlan.self)
            == ["custom 2.0.0 → 3.0.0 (didMigrate)"])
        // Nothing of the failed didMigrate was saved.
        let rows = try SQLiteStore.contentDump(at: url)
        #expect(!rows.contains { $0.hasPrefix("Shelf ") })
        FlakyShelfPlan.failing.withLock { $0 = false }
        let container = try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: FlakyShelfPlan.self, location: .file(url))
        #expect(try await Self.books(container).first == "Book 0|0|1")
        try await container.close()
        #expect(FlakyShelfPlan.willMigrateRuns.withLock { $0 } == 1)
        #expect(FlakyShelfPlan.didMigrateRuns.withLock { $0 } == 2)
        #expect(try SQLiteStore.savedState(at: url).metadata["migrationStep"] == nil)
    }

    @Test("A malformed plan is refused at open, naming the fault, before the file is touched", arguments: [
        (BrokenPlans.SkipsAVersion.self as any SchemaMigrationPlan.Type, "stage 1 (lightweight 1.0.0 → 3.0.0) skips version 2.0.0"),
        (BrokenPlans.RepeatsAVersion.self, "stage 2 (lightweight 1.0.0 → 2.0.0) repeats version 1.0.0"),
        (BrokenPlans.EndsEarly.self, "its stages end at version 2.0.0, not at the current version 3.0.0"),
        (BrokenPlans.NotEndingAtCurrent.self, "its last version is 2.0.0"),
        (BrokenPlans.SameModelTwice.self, "versions 2.0.0 and 2.1.0 have the same model"),
    ])
    func malformedPlans(plan: any SchemaMigrationPlan.Type, fault: String) async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let before = try SQLiteStore.contentDump(at: url)
        let error = await #expect(throws: LoomError.self) {
            _ = try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: plan, location: .file(url))
        }
        #expect(error?.code == .invalidMigrationPlan)
        #expect(error?.message.contains(fault) == true, "\(error?.message ?? "")")
        #expect(try SQLiteStore.contentDump(at: url) == before)
    }

    @Test("A store saved by no version of the plan is unknownSchemaVersion, naming the nearest version and each difference")
    func unknownVersion() async throws {
        // A V1 store with an extra attribute no version has.
        let stray = Self.storeURL()
        let strayContainer = PersistentContainer(store: try SQLiteStore(url: stray, schema: try Schema([StrayBook.Book.self])))
        try await strayContainer.close()
        let before = try SQLiteStore.contentDump(at: stray)
        let error = await #expect(throws: LoomError.self) {
            _ = try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: ShelfPlan.self, location: .file(stray))
        }
        #expect(error?.code == .unknownSchemaVersion)
        let message = error?.message ?? ""
        #expect(message.contains("The nearest is 1.0.0, which differs in 1 way: Book.isbn is in the store but not in the model"), "\(message)")
        #expect(message.contains("(1.0.0, 2.0.0, 3.0.0)"))
        #expect(try SQLiteStore.contentDump(at: stray) == before)
        #expect(throws: LoomError.self) {
            try PersistentContainer.requiredMigrationStages(forStoreAt: stray, version: ShelfV3.self, migrationPlan: ShelfPlan.self)
        }
    }

    @Test("The in-memory store has nothing to migrate: a plan is checked, and the store starts empty with the current version")
    func inMemory() async throws {
        let container = try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: ShelfPlan.self, location: .inMemory)
        #expect(container.schema.versionHash == (try Schema(versionedSchema: ShelfV3.self)).versionHash)
        try await container.close()
        await #expect(throws: LoomError.self) {
            _ = try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: BrokenPlans.SkipsAVersion.self, location: .inMemory)
        }
    }
}

extension VersionedMigrationTests {
    @Test("Removing a uniqueness constraint is inferred: the saved objects stay, and duplicates may be saved after")
    func uniquenessRemoved() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        try await PersistentContainer(name: "shelf", for: ShelfV3.self, migrationPlan: ShelfPlan.self, location: .file(url)).close()
        let steps = try PersistentContainer.requiredMigrationStages(forStoreAt: url, version: ShelfV4.self)
        #expect(steps.first?.contains("change the uniqueness constraints of Book") == true, "\(steps)")
        let v4 = try await PersistentContainer(name: "shelf", for: ShelfV4.self, location: .file(url))
        try await v4.save { context in context.insert(ShelfV4.Book(name: "Book 0", number: 1_000)) }
        let count = try await v4.performBackgroundTask { try $0.count(for: FetchRequest<ShelfV4.Book>(predicate: #Predicate { $0.name == "Book 0" })) }
        #expect(count == 2)
        try await v4.close()
        #expect(try SQLiteStore.savedState(at: url).metadata["versionIdentifier"] == "4.0.0")
    }
}
