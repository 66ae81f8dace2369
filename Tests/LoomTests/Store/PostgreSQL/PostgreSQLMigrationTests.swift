import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomPostgreSQL
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization
import Testing

/// Inferred migrations on PostgreSQL: the same models and expectations as SQLite's suites
/// (`MigrationTests`, `RelationshipRenameTests`, `RelationshipKindTests`), through the statements
/// both stores share, plus what only a server has: servers starting together migrate once.
@Suite("PostgreSQL store: inferred migrations", PostgresServer.required, .timeLimit(.minutes(5)))
struct PostgreSQLMigrationTests {
    static func open(_ configuration: PostgreSQLStore.Configuration, _ schema: Schema) throws -> PersistentContainer {
        PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
    }

    /// A V1 store with three notes (one without a subtitle) and a duplicated title.
    static func makeV1Store(_ configuration: PostgreSQLStore.Configuration) async throws {
        try await NotesV1.fill(try open(configuration, try NotesV1.schema()))
    }

    /// Every table and column of the store's schema, and every row of its Note table, as text:
    /// what "the store is unchanged" compares.
    static func contents(_ configuration: PostgreSQLStore.Configuration) async throws -> [String] {
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try configuration.connectionConfiguration, id: 1, logger: logger)
        do {
            let lines = try await read(connection, configuration.schemaName, logger)
            try await connection.close()
            return lines
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private static func read(_ connection: PostgresConnection, _ schemaName: String, _ logger: Logger) async throws -> [String] {
        var lines: [String] = []
        let columns = try await connection.query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text FROM information_schema.columns WHERE table_schema = \(schemaName) ORDER BY 1, 2",
            logger: logger)
        for try await (table, column, type, nullable) in columns.decode((String, String, String, String).self) {
            lines.append("\(table).\(column) \(type) \(nullable)")
        }
        let indexes = try await connection.query(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = \(schemaName) ORDER BY 1", logger: logger)
        for try await name in indexes.decode(String.self) { lines.append("index \(name)") }
        let rows = try await connection.query(
            "SELECT row_to_json(n)::text FROM \(unescaped: "\"\(schemaName)\".\"Note\"") n ORDER BY \"Z_PK\"", logger: logger)
        for try await row in rows.decode(String.self) { lines.append(row) }
        return lines
    }

    @Test("A V1 store opens with V2: renamed values kept, NULLs take the default, types widened, new attributes and relationships usable")
    func inferredMigration() async throws {
        let configuration = try PostgresServer.configuration()
        try await Self.makeV1Store(configuration)
        let container = try Self.open(configuration, try NotesV2.schema())
        #expect(try await NotesV2.summaries(container) == NotesV2.migratedSummaries)
        try await NotesV2.useNewRelationships(container)
        // The history before the migration is gone; after it, saves are recorded as usual.
        #expect(try await container.performBackgroundTask { try $0.fetchHistory(HistoryDescriptor()).count } == 1)
        try await container.close()
        let reopened = try Self.open(configuration, try NotesV2.schema())
        #expect(try await NotesV2.groceries(reopened) == NotesV2.groceriesAfterUse)
        try await reopened.close()
    }

    @Test("A table rebuilt twice (two migrations in a row) keeps working, and keeps no name of the rebuild's")
    func rebuiltTwice() async throws {
        let configuration = try PostgresServer.configuration()
        try await Self.makeV1Store(configuration)
        // V1 → required subtitle with a default (a rebuild) → V1 again (another rebuild).
        try await Self.open(configuration, try NotesV2.schema()).close()
        let back = try Self.open(configuration, try Schema([NotesRebuiltAgain.Note.self]))
        let headings = try await back.performBackgroundTask { context in
            try context.fetch(FetchRequest<NotesRebuiltAgain.Note>(sortBy: [SortDescriptor(\.heading)])).map { "\($0.heading):\($0.subtitle ?? "nil")" }
        }
        #expect(headings == ["Groceries:weekly", "Ideas:none", "Ideas:second"])
        try await back.close()
        // No name of the rebuilds' is left: the primary key's index is named after the table.
        let indexes = try await Self.contents(configuration).filter { $0.hasPrefix("index ") }
        #expect(indexes.contains("index Note_pkey"), "\(indexes)")
        #expect(!indexes.contains { $0.contains("loom_migrating") }, "\(indexes)")
    }

    @Test("A required attribute left without values fails the migration, naming it and the rows, and changes nothing", arguments: [false, true])
    func missingRequiredValues(newAttribute: Bool) async throws {
        let configuration = try PostgresServer.configuration()
        try await Self.makeV1Store(configuration)
        let before = try await Self.contents(configuration)
        let schema = newAttribute ? try Schema([NotesBroken.RequiredWithoutDefault.Note.self]) : try Schema([NotesBroken.RequiredSubtitle.Note.self])
        let error = try #require(throws: LoomError.self) { _ = try PostgreSQLStore(configuration: configuration, schema: schema) }
        #expect(error.code == .migrationFailed)
        #expect(error.entityName == "Note")
        #expect(error.attributeNames == [newAttribute ? "author" : "subtitle"])
        #expect(error.message.contains(newAttribute ? "3 saved Note rows have no value" : "1 saved Note row has no value"), "\(error.message)")
        #expect(try await Self.contents(configuration) == before)
        let container = try Self.open(configuration, try NotesV1.schema())
        #expect(try await container.performBackgroundTask { try $0.count(for: FetchRequest<NotesV1.Note>()) } == 3)
        try await container.close()
    }

    @Test("Making an attribute unique over duplicated values fails, naming one duplicate, and changes nothing")
    func duplicatesRefuseUniqueness() async throws {
        let configuration = try PostgresServer.configuration()
        try await Self.makeV1Store(configuration)
        let before = try await Self.contents(configuration)
        let error = try #require(throws: LoomError.self) {
            _ = try PostgreSQLStore(configuration: configuration, schema: try Schema([NotesBroken.UniqueTitle.Note.self]))
        }
        #expect(error.code == .migrationFailed)
        #expect(error.attributeNames == ["title"])
        #expect(error.message.contains(#"2 saved rows share title = "Ideas""#), "\(error.message)")
        #expect(try await Self.contents(configuration) == before)
    }

    @Test("A change that cannot be inferred is a schema mismatch naming it, and changes nothing")
    func narrowingIsRefused() async throws {
        let configuration = try PostgresServer.configuration()
        try await Self.makeV1Store(configuration)
        let before = try await Self.contents(configuration)
        let error = try #require(throws: LoomError.self) {
            _ = try PostgreSQLStore(configuration: configuration, schema: try Schema([NotesBroken.NarrowedWeight.Note.self]))
        }
        #expect(error.code == .schemaMismatch)
        #expect(error.message.contains("Note.weight changes from float to integer16"))
        #expect(try await Self.contents(configuration) == before)
    }

    @Test("Renamed relationships and entities, and one-to-many becoming many-to-many, keep every link")
    func relationships() async throws {
        let configuration = try PostgresServer.configuration()
        try await LibraryRelsV1.fill(try Self.open(configuration, try LibraryRelsV1.schema()))
        for schema in [try LibraryRelsV2.schema(), try LibraryRelsV3.schema()] { try await Self.open(configuration, schema).close() }
        let v3 = try Self.open(configuration, try LibraryRelsV3.schema())
        #expect(try await LibraryRelsV3.readAndAddGreen(v3) == LibraryRelsV3.expectedAfterGreen)
        try await LibraryRelsV3.expectKeysKept(v3)
        try await v3.close()

        let household = try PostgresServer.configuration()
        try await HouseholdV1.fill(try Self.open(household, try HouseholdV1.schema()))
        let h2 = try Self.open(household, try HouseholdV2.schema())
        #expect(try await HouseholdV2.links(h2) == HouseholdV2.migratedLinks)
        try await h2.close()
    }

    /// The schema the start-up test's processes share: named after the test process.
    static func sharedSchema(parent: Int32) -> String { "loom_migrate_\(parent)" }

    @Test("Eight processes opening an outdated store at once: one migrates, the others open the migrated store", .ownThreads)
    func concurrentStartUp() async throws {
        var configuration = try PostgresServer.configuration()
        configuration.schemaName = Self.sharedSchema(parent: getpid())
        try await Self.makeV1Store(configuration)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await #expect(processExitsWith: .success) {
                        var configuration = try PostgresServer.configuration()
                        configuration.schemaName = PostgreSQLMigrationTests.sharedSchema(parent: getppid())
                        let container = try PostgreSQLMigrationTests.open(configuration, try NotesV2.schema())
                        let count = try await container.performBackgroundTask { try $0.count(for: FetchRequest<NotesV2.Note>()) }
                        try await container.close()
                        if count != 3 { exit(3) }
                    }
                }
            }
        }
        // One migration: its transaction is the only one in the history.
        let container = try Self.open(configuration, try NotesV2.schema())
        let history = try await container.performBackgroundTask { context in
            try context.fetchHistory(HistoryDescriptor()).count
        }
        let token = try await container.performBackgroundTask { try $0.currentHistoryToken() }
        #expect(history == 0)
        #expect(token?.transactionNumber == 2)
        try await container.close()
    }
}

/// Versioned plans on PostgreSQL: SQLite's plans and expectations (`VersionedMigrationTests`,
/// `TransformMigrationTests`) through `PostgreSQLStore.Location`.
@Suite("PostgreSQL store: migration plans", PostgresServer.required, .timeLimit(.minutes(5)))
struct PostgreSQLMigrationPlanTests {
    @Test("A V1 store opens with V3 through the plan: lightweight then custom stage, each step once, the version saved")
    func migratesThroughTheStages() async throws {
        let configuration = try PostgresServer.configuration()
        #expect(try PersistentContainer.requiredMigrationStages(postgres: configuration, version: ShelfV3.self, migrationPlan: ShelfPlan.self) == [])
        try await VersionedMigrationTests.fillV1(try await PersistentContainer(for: ShelfV1.self, postgres: configuration))
        #expect(try PersistentContainer.requiredMigrationStages(postgres: configuration, version: ShelfV3.self, migrationPlan: ShelfPlan.self)
            == ["lightweight 1.0.0 → 2.0.0", "custom 2.0.0 → 3.0.0"])
        let steps = Mutex<[String]>([])
        let container = try await PersistentContainer(
            for: ShelfV3.self, migrationPlan: ShelfPlan.self, postgres: configuration,
            progress: { progress in steps.withLock { $0.append(VersionedMigrationTests.line(progress)) } })
        let books = try await VersionedMigrationTests.books(container)
        #expect(books.count == 27)
        #expect(books.first == "Book 0|0|1")
        #expect(books.contains("Book 8|8|9") && !books.contains { $0.hasSuffix("|9|10") })
        try await container.close()
        #expect(steps.withLock { $0 } == VersionedMigrationTests.shelfPlanSteps)
        let state = try PostgreSQLStore.savedState(configuration: configuration)
        #expect(state.metadata["versionIdentifier"] == "3.0.0")
        #expect(state.metadata["migrationStep"] == nil)
        // Reopened: nothing run again (didMigrate puts one shelf in).
        let reopened = try await PersistentContainer(for: ShelfV3.self, migrationPlan: ShelfPlan.self, postgres: configuration)
        #expect(try await VersionedMigrationTests.books(reopened) == books)
        #expect(try await reopened.performBackgroundTask { try $0.count(for: FetchRequest<ShelfV3.Shelf>()) } == 1)
        try await reopened.close()
        // Destroyed: the schema is gone (twice is no error), and the store opens empty again.
        try PostgreSQLStore.destroy(configuration: configuration)
        try PostgreSQLStore.destroy(configuration: configuration)
        #expect(throws: LoomError.self) { try PostgreSQLStore.savedState(configuration: configuration) }
        let fresh = try await PersistentContainer(for: ShelfV3.self, migrationPlan: ShelfPlan.self, postgres: configuration)
        #expect(try await VersionedMigrationTests.books(fresh).isEmpty)
        try await fresh.close()
    }

    @Test("A transform stage reads the old version from a copy of the schema, chunk by chunk, and drops the copy")
    func transformStage() async throws {
        let configuration = try PostgresServer.configuration()
        try await TransformMigrationTests.fillV1(try await PersistentContainer(for: PeopleV1.self, postgres: configuration))
        let steps = Mutex<[MigrationProgress]>([])
        let container = try await PersistentContainer(
            for: PeopleV2.self, migrationPlan: PeoplePlan.self, postgres: configuration, progress: { progress in steps.withLock { $0.append(progress) } })
        let people = try await TransformMigrationTests.people(container)
        #expect(people.count == 2_500)
        #expect(people.first == "Given0|Family 0|0")
        #expect(people.allSatisfy { !$0.hasPrefix("|") && !$0.contains("||") })
        #expect(steps.withLock { $0 }.filter { $0.step == "transform" }.map(\.objectsDone) == [0, 1_000, 2_000, 2_500])
        #expect(PostgreSQLStore.Location(configuration: configuration).snapshot == nil)
        #expect(try PostgreSQLStore.savedState(configuration: configuration).metadata["versionIdentifier"] == "2.0.0")
    }

    static func sharedSchema(parent: Int32) -> String { "loom_plan_\(parent)" }

    @Test("Eight processes opening a V1 store with the plan at once: one migrates, each step runs once, the others open the result", .ownThreads)
    func concurrentStartUp() async throws {
        var configuration = try PostgresServer.configuration()
        configuration.schemaName = Self.sharedSchema(parent: getpid())
        try await VersionedMigrationTests.fillV1(try await PersistentContainer(for: ShelfV1.self, postgres: configuration))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await #expect(processExitsWith: .success) {
                        var configuration = try PostgresServer.configuration()
                        configuration.schemaName = PostgreSQLMigrationPlanTests.sharedSchema(parent: getppid())
                        let container = try await PersistentContainer(for: ShelfV3.self, migrationPlan: ShelfPlan.self, postgres: configuration)
                        let count = try await VersionedMigrationTests.books(container).count
                        try await container.close()
                        if count != 27 { exit(3) }
                    }
                }
            }
        }
        let container = try await PersistentContainer(for: ShelfV3.self, migrationPlan: ShelfPlan.self, postgres: configuration)
        #expect(try await container.performBackgroundTask { try $0.count(for: FetchRequest<ShelfV3.Shelf>()) } == 1)
        try await container.close()
    }
}
