import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomPostgreSQL
@_spi(LoomStore) import LoomSQLite
import Testing

/// A plan of one stage from `KeepV1`, the stage set for the task that opens the store: each form
/// and opt-in without a plan type of its own.
enum OneStagePlan: SchemaMigrationPlan {
    @TaskLocal static var stage = MigrationStage.lightweight(fromVersion: KeepV1.self, toVersion: KeepV2WithoutTags.self)
    static var schemas: [any VersionedSchema.Type] { [stage.fromVersion, stage.toVersion] }
    static var stages: [MigrationStage] { [stage] }

    /// Adds an item: run before a refusal, it would show in the store.
    @Sendable static func willMigrate(_ context: ManagedObjectContext) throws { context.insert(KeepV1.Item(name: "from willMigrate", note: nil)) }
}

/// The form of a stage, for the parameterized cases.
enum StageForm: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case lightweight, custom, transform
    var testDescription: String { rawValue }

    /// The stage of this form to `version`; a transform transforms items, or tags.
    func stage(to version: any VersionedSchema.Type, allowsDataLoss: Bool = false, transformingTags: Bool = false) -> MigrationStage {
        switch self {
        case .lightweight: .lightweight(fromVersion: KeepV1.self, toVersion: version, allowsDataLoss: allowsDataLoss)
        case .custom: .custom(fromVersion: KeepV1.self, toVersion: version, willMigrate: OneStagePlan.willMigrate, didMigrate: nil, allowsDataLoss: allowsDataLoss)
        case .transform where transformingTags:
            .custom(fromVersion: KeepV1.self, toVersion: version, transforming: KeepV1.Tag.self, allowsDataLoss: allowsDataLoss) { _, _, _ in }
        case .transform:
            .custom(fromVersion: KeepV1.self, toVersion: version, transforming: KeepV1.Item.self, allowsDataLoss: allowsDataLoss) { _, _, _ in }
        }
    }
}

/// A store of `KeepV1` on SQLite or PostgreSQL, opened through migration plans.
struct PlanStore {
    let kind: StoreKind
    let url: URL
    let postgres: PostgreSQLStore.Configuration?

    init(_ kind: StoreKind) throws {
        self.kind = kind
        url = TemporaryDirectory.make().appending(path: "keep.loom")
        postgres = kind == .postgres ? try PostgresServer.configuration() : nil
    }

    func open(_ version: any VersionedSchema.Type, plan: (any SchemaMigrationPlan.Type)? = nil) async throws -> PersistentContainer {
        if let postgres { return try await PersistentContainer(for: version, migrationPlan: plan, postgres: postgres) }
        return try await PersistentContainer(name: "keep", for: version, migrationPlan: plan, location: .file(url))
    }

    /// Opens with ``OneStagePlan`` running `stage`.
    func open(through stage: MigrationStage) async throws -> PersistentContainer {
        try await OneStagePlan.$stage.withValue(stage) { try await open(stage.toVersion, plan: OneStagePlan.self) }
    }

    /// Every item and tag as text, with the saved version: what "the store is unchanged" compares.
    func contents() async throws -> [String] {
        let version = if let postgres { try PostgreSQLStore.savedState(configuration: postgres).metadata["versionIdentifier"] } else { try SQLiteStore.savedState(at: url).metadata["versionIdentifier"] }
        let container = try await open(KeepV1.self)
        let lines = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<KeepV1.Item>(sortBy: [SortDescriptor(\.name)])).map { "item \($0.name) \($0.note ?? "-")" }
                + context.fetch(FetchRequest<KeepV1.Tag>(sortBy: [SortDescriptor(\.label)])).map { "tag \($0.label) \($0.color ?? "-")" }
        }
        try await container.close()
        return ["version \(version ?? "-")"] + lines
    }
}

@Suite("Migration plans: no stage form drops saved data unannounced", .timeLimit(.minutes(5)))
struct DataLossTests {
    /// Five items (three with a note; two named alike) and seven tags (two with a color).
    static func fill(_ container: PersistentContainer) async throws {
        try await container.save { context in
            for i in 0..<5 { context.insert(KeepV1.Item(name: "item \(i % 4)", note: i < 3 ? "note \(i)" : nil)) }
            for i in 0..<7 { context.insert(KeepV1.Tag(label: "tag \(i)", color: i < 2 ? "red" : nil)) }
        }
        try await container.close()
    }

    static var cases: [(StoreKind, StageForm)] { StoreKind.persistentCases.flatMap { kind in StageForm.allCases.map { (kind, $0) } } }

    @Test("A stage of any form whose new version drops an entity still holding objects fails without allowsDataLoss, naming it, before any of its code runs, and changes nothing", arguments: cases)
    func droppedEntityIsRefused(kind: StoreKind, form: StageForm) async throws {
        let store = try PlanStore(kind)
        try await Self.fill(try await store.open(KeepV1.self))
        let before = try await store.contents()
        let error = await #expect(throws: LoomError.self) { _ = try await store.open(through: form.stage(to: KeepV2WithoutTags.self)) }
        #expect(error?.code == .migrationFailed)
        #expect(error?.entityName == "Tag")
        #expect(error?.message.contains("drops entity Tag, which holds 7 objects") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("allowsDataLoss: true") == true)
        #expect(try await store.contents() == before, "changed (by willMigrate?)")
        if kind == .sqlite { #expect(!FileManager.default.fileExists(atPath: store.url.path + "-migration-source")) }

        // Said: the stage runs, and the tags go with it.
        let container = try await store.open(through: form.stage(to: KeepV2WithoutTags.self, allowsDataLoss: true))
        let items = try await container.performBackgroundTask { try $0.fetch(FetchRequest<KeepV2WithoutTags.Item>()).count }
        #expect(items == (form == .custom ? 6 : 5))
        try await container.close()
    }

    @Test("A stage of any form whose new version drops an attribute still holding values fails without allowsDataLoss, naming it, and changes nothing", arguments: cases)
    func droppedAttributeIsRefused(kind: StoreKind, form: StageForm) async throws {
        let store = try PlanStore(kind)
        try await Self.fill(try await store.open(KeepV1.self))
        let before = try await store.contents()
        let error = await #expect(throws: LoomError.self) { _ = try await store.open(through: form.stage(to: KeepV2WithoutNotes.self, transformingTags: true)) }
        #expect(error?.code == .migrationFailed)
        #expect(error?.entityName == "Item")
        #expect(error?.attributeNames == ["note"])
        #expect(error?.message.contains("drops attribute Item.note, which holds 3 values") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("note 0") == false, "a value in the message")
        #expect(try await store.contents() == before)

        let container = try await store.open(through: form.stage(to: KeepV2WithoutNotes.self, allowsDataLoss: true, transformingTags: true))
        let names = try await container.performBackgroundTask { try $0.fetch(FetchRequest<KeepV2WithoutNotes.Item>(sortBy: [SortDescriptor(\.name)])).map(\.name) }
        #expect(names == (form == .custom ? ["from willMigrate"] : []) + ["item 0", "item 0", "item 1", "item 2", "item 3"])
        try await container.close()
    }

    @Test("What holds no data may go without allowsDataLoss: an empty entity, an attribute holding only NULLs, a transform's own entity's attributes", arguments: StoreKind.persistentCases)
    func nothingToLose(kind: StoreKind) async throws {
        // No tags, and no notes: every form drops them without being told.
        for form in StageForm.allCases {
            for entity in [true, false] {
                let store = try PlanStore(kind)
                let v1 = try await store.open(KeepV1.self)
                try await v1.save { context in context.insert(KeepV1.Item(name: "bare", note: nil)) }
                try await v1.close()
                let container = try await store.open(through: form.stage(to: entity ? KeepV2WithoutTags.self : KeepV2WithoutNotes.self, transformingTags: !entity))
                try await container.close()
            }
        }
        // Notes held, but the transform of items reads them.
        let store = try PlanStore(kind)
        try await Self.fill(try await store.open(KeepV1.self))
        let container = try await store.open(through: StageForm.transform.stage(to: KeepV2WithoutNotes.self))
        try await container.close()
    }

    @Test("Opening without a plan migrates by inference as Core Data does: what the model no longer has goes", arguments: StoreKind.persistentCases)
    func inferredMigrationDrops(kind: StoreKind) async throws {
        let store = try PlanStore(kind)
        try await Self.fill(try await store.open(KeepV1.self))
        let container = try await store.open(KeepV2WithoutTags.self)
        #expect(try await container.performBackgroundTask { try $0.fetch(FetchRequest<KeepV2WithoutTags.Item>()).count } == 5)
        try await container.close()
    }
}
