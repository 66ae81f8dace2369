import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Synchronization
import Testing

@Suite("Inferred migrations")
struct MigrationTests {
    static func storeURL() -> URL { TemporaryDirectory.make().appending(path: "notes.loom") }

    /// A V1 store with three notes (one without a subtitle) and a duplicated title.
    static func makeV1Store(at url: URL) async throws {
        try await NotesV1.fill(PersistentContainer(store: try SQLiteStore(url: url, schema: try NotesV1.schema())))
    }

    /// Every schema object and row of the store (its bytes may change in a checkpoint).
    static func contents(_ url: URL) throws -> [String] { try SQLiteStore.contentDump(at: url) }

    @Test("A V1 store opens with V2: renamed values kept, NULLs take the default, types widened, new attributes and relationships usable")
    func inferredMigration() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try NotesV2.schema()))
        #expect(try await NotesV2.summaries(container) == NotesV2.migratedSummaries)
        // The new relationships and entities work, and save.
        try await NotesV2.useNewRelationships(container)
        try await container.close()
        // Reopened with V2: nothing left to migrate, everything kept.
        let reopened = PersistentContainer(store: try SQLiteStore(url: url, schema: try NotesV2.schema()))
        #expect(try await NotesV2.groceries(reopened) == NotesV2.groceriesAfterUse)
        try await reopened.close()
        #expect(try SQLiteStore.savedSchema(at: url).versionHash == (try NotesV2.schema()).versionHash)
    }

    @Test("The forecast says what opening with a model would migrate, and changes nothing")
    func forecast() async throws {
        let url = Self.storeURL()
        #expect(try SQLiteStore.requiredMigration(forStoreAt: url, schema: try NotesV2.schema()) == [])
        try await Self.makeV1Store(at: url)
        let before = try Self.contents(url)
        #expect(try SQLiteStore.requiredMigration(forStoreAt: url, schema: try NotesV1.schema()) == [])
        let steps = try SQLiteStore.requiredMigration(forStoreAt: url, schema: try NotesV2.schema())
        #expect(steps.contains("rename Note.title to heading"))
        #expect(steps.contains("remove Note.draft"))
        #expect(steps.contains("add entity Folder"))
        #expect(steps.contains("widen Note.count from integer16 to integer64"))
        let error = try #require(throws: LoomError.self) {
            try SQLiteStore.requiredMigration(forStoreAt: url, schema: try Schema([NotesBroken.NarrowedWeight.Note.self]))
        }
        #expect(error.code == .schemaMismatch)
        #expect(try Self.contents(url) == before)
    }

    @Test("Adding only optional attributes and entities adds columns in place, without rebuilding the table")
    func addColumnsInPlace() throws {
        let v1 = try NotesV1.schema()
        let record = v1.record
        let note = try #require(v1.entity(named: "Note"))
        let added = EntityDescription(name: "Note", modelType: nil, attributes: note.attributes + [
            AttributeDescription(name: "body", type: .string, isOptional: true),
        ])
        let migration = try SchemaMigration.infer(from: record, to: try Schema([added, EntityDescription(name: "Extra", modelType: nil, attributes: [])]))
        #expect(migration.tables.count == 2)
        if case .alter(let entity, let renames, let slots) = migration.tables.first {
            #expect(renames.isEmpty)
            #expect(entity.name == "Note")
            #expect(slots.map { entity.storedValueName(at: $0) } == ["body"])
        } else {
            Issue.record("expected columns added in place, got \(migration.tables)")
        }
        if case .create(let entity) = migration.tables.last { #expect(entity.name == "Extra") } else { Issue.record("expected a new table") }
    }

    @Test("A rebuild reports its rows as it copies them, about every 1% (at least 10,000 rows), and copies them all")
    func rebuildProgress() async throws {
        let url = Self.storeURL()
        let v1 = PersistentContainer(store: try SQLiteStore(url: url, schema: try NotesV1.schema()))
        try await v1.save { context in
            for i in 0..<25_000 { context.insert(NotesV1.Note(title: "note \(i)", subtitle: i % 2 == 0 ? "even" : nil)) }
        }
        try await v1.close()
        let reports = Mutex<[String]>([])
        let store = try SQLiteStore(url: url, schema: try NotesV2.schema(), metadata: [:], migrationProgress: { entity, done, total, fraction in
            reports.withLock { $0.append("\(entity) \(done)/\(total) \(Int(fraction * 100))%") }
        })
        let container = PersistentContainer(store: store)
        let counts = try await container.performBackgroundTask { context in
            (try context.count(for: FetchRequest<NotesV2.Note>()), try context.count(for: FetchRequest<NotesV2.Note>(predicate: #Predicate { $0.subtitle == "none" })))
        }
        try await container.close()
        #expect(counts == (25_000, 12_500))
        #expect(reports.withLock { $0 } == ["Note 0/25000 0%", "Note 10000/25000 40%", "Note 20000/25000 80%", "Note 25000/25000 100%"])
    }

    @Test("A rename alone renames the column in place: no rebuild, values kept")
    func renameInPlace() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let statements = Mutex<[String]>([])
        var options = SQLiteStore.Options()
        options.trace = { sql in statements.withLock { $0.append(sql) } }
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema([NotesRenamed.Note.self]), options: options))
        let scratch = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<NotesRenamed.Note>(predicate: #Predicate { $0.scratch != nil })).map { $0.scratch ?? "" }
        }
        try await container.close()
        #expect(scratch == ["half-written"])
        let ddl = statements.withLock { $0 }.filter { $0.hasPrefix("ALTER") || $0.hasPrefix("INSERT INTO \"loom_migrating") || $0.hasPrefix("CREATE TABLE \"") }
        #expect(ddl == [#"ALTER TABLE "Note" RENAME COLUMN "draft" TO "scratch""#])
    }

    @Test("A required attribute left without values fails the migration, naming it and the rows, and changes nothing", arguments: [false, true])
    func missingRequiredValues(newAttribute: Bool) async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let before = try Self.contents(url)
        let schema = newAttribute ? try Schema([NotesBroken.RequiredWithoutDefault.Note.self]) : try Schema([NotesBroken.RequiredSubtitle.Note.self])
        let error = try #require(throws: LoomError.self) { _ = try SQLiteStore(url: url, schema: schema) }
        #expect(error.code == .migrationFailed)
        #expect(error.entityName == "Note")
        #expect(error.attributeNames == [newAttribute ? "author" : "subtitle"])
        #expect(error.message.contains(newAttribute ? "3 saved Note rows have no value" : "1 saved Note row has no value"))
        #expect(try Self.contents(url) == before)
        // Still a V1 store, whole.
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try NotesV1.schema()))
        #expect(try await container.performBackgroundTask { try $0.count(for: FetchRequest<NotesV1.Note>()) } == 3)
        try await container.close()
    }

    @Test("Making an attribute unique over duplicated values fails, naming one duplicate, and changes nothing")
    func duplicatesRefuseUniqueness() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let before = try Self.contents(url)
        let error = try #require(throws: LoomError.self) { _ = try SQLiteStore(url: url, schema: try Schema([NotesBroken.UniqueTitle.Note.self])) }
        #expect(error.code == .migrationFailed)
        #expect(error.attributeNames == ["title"])
        #expect(error.message.contains(#"2 saved rows share title = "Ideas""#))
        #expect(try Self.contents(url) == before)
    }

    @Test("A change that cannot be inferred is a schema mismatch naming it, found before anything is written")
    func narrowingIsRefused() async throws {
        let url = Self.storeURL()
        try await Self.makeV1Store(at: url)
        let before = try Self.contents(url)
        let error = try #require(throws: LoomError.self) { _ = try SQLiteStore(url: url, schema: try Schema([NotesBroken.NarrowedWeight.Note.self])) }
        #expect(error.code == .schemaMismatch)
        #expect(error.message.contains("Note.weight changes from float to integer16"))
        #expect(try Self.contents(url) == before)
    }

    @Test("Eight containers opening an outdated store at once, twenty times: none fails with 'database is locked'")
    func concurrentOpensInOneProcess() async throws {
        for _ in 0..<20 {
            let url = Self.storeURL()
            try await Self.makeV1Store(at: url)
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try NotesV2.schema()))
                        let count = try await container.performBackgroundTask { try $0.count(for: FetchRequest<NotesV2.Note>()) }
                        try await container.close()
                        return count
                    }
                }
                for try await count in group { #expect(count == 3) }
            }
        }
    }

    /// Where the start-up test keeps its store: named after the test process.
    static func sharedStore(parent: Int32) -> URL {
        FileManager.default.temporaryDirectory.appending(path: "loom-migrate-\(parent).loom")
    }

    @Test("Eight processes opening an outdated store at once: one migrates, the others open the migrated store", .ownThreads)
    func concurrentStartUp() async throws {
        let url = Self.sharedStore(parent: getpid())
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
        }
        try await Self.makeV1Store(at: url)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await #expect(processExitsWith: .success) {
                        let container = PersistentContainer(store: try SQLiteStore(url: MigrationTests.sharedStore(parent: getppid()), schema: try NotesV2.schema()))
                        let count = try await container.performBackgroundTask { try $0.count(for: FetchRequest<NotesV2.Note>()) }
                        try await container.close()
                        if count != 3 { exit(3) }
                    }
                }
            }
        }
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try NotesV2.schema()))
        let headings = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<NotesV2.Note>(sortBy: [SortDescriptor(\.heading)])).map(\.heading)
        }
        #expect(headings == ["Groceries", "Ideas", "Ideas"])
        try await container.close()
    }
}

@Suite("Inferred migrations: renamed relationships and entities")
struct RelationshipRenameTests {
    @Test("Renamed to-one, ordered to-many and many-to-many relationships keep their links, order included")
    func renamedRelationshipsKeepTheirLinks() async throws {
        let url = MigrationTests.storeURL()
        try await LibraryRelsV1.fill(PersistentContainer(store: try SQLiteStore(url: url, schema: try LibraryRelsV1.schema())))
        let steps = try SQLiteStore.requiredMigration(forStoreAt: url, schema: try LibraryRelsV2.schema())
        #expect(steps.contains("rename relationship Book.author to writer"), "\(steps)")
        #expect(steps.contains("rename relationship Author.books to works"), "\(steps)")
        #expect(steps.contains("rename relationship Book.tags to labels"), "\(steps)")
        #expect(!steps.contains { $0.hasPrefix("remove") || $0.hasPrefix("add") }, "\(steps)")

        let v2 = PersistentContainer(store: try SQLiteStore(url: url, schema: try LibraryRelsV2.schema()))
        let found = try await v2.performBackgroundTask { context in
            let ann = try #require(try context.fetch(FetchRequest<LibraryRelsV2.Author>()).first)
            let books = try context.fetch(FetchRequest<LibraryRelsV2.Book>(sortBy: [SortDescriptor(\.title)]))
            let tags = try context.fetch(FetchRequest<LibraryRelsV2.Tag>(sortBy: [SortDescriptor(\.name)]))
            return [
                ann.works.map(\.title).joined(separator: ","),
                books.map { "\($0.title):\($0.writer?.name ?? "-"):\($0.labels.map(\.name).sorted().joined(separator: "+"))" }.joined(separator: " "),
                tags.map { "\($0.name):\($0.books.map(\.title).sorted().joined(separator: "+"))" }.joined(separator: " "),
            ]
        }
        try await v2.close()
        #expect(found == ["B2,B1,B3", "B1:Ann:red B2:Ann:blue+red B3:Ann:", "blue:B2 red:B1+B2"])
        let tables = try SQLiteStore.contentDump(at: url).filter { $0.hasPrefix("table ") }.map { $0.prefix { $0 != ":" } }
        #expect(tables.contains("table Z_Book_labels"))
        #expect(!tables.contains("table Z_Book_tags"))

        // Then the entities renamed: their objects, keys and links kept.
        let renames = try SQLiteStore.requiredMigration(forStoreAt: url, schema: try LibraryRelsV3.schema())
        #expect(renames.contains("rename entity Author to Writer"), "\(renames)")
        #expect(renames.contains("rename entity Tag to Audience"), "\(renames)")
        #expect(!renames.contains { $0.hasPrefix("remove") || $0.hasPrefix("add") }, "\(renames)")
        let v3 = PersistentContainer(store: try SQLiteStore(url: url, schema: try LibraryRelsV3.schema()))
        #expect(try await LibraryRelsV3.readAndAddGreen(v3) == LibraryRelsV3.expectedAfterGreen)
        try await LibraryRelsV3.expectKeysKept(v3)
        try await v3.close()
        let renamedTables = try SQLiteStore.contentDump(at: url).filter { $0.hasPrefix("table ") }.map { String($0.prefix { $0 != ":" }) }
        #expect(renamedTables.filter { !$0.hasPrefix("table loom_") }.sorted() == ["table Audience", "table Book", "table Writer", "table Z_Audience_books"])
    }
}

@Suite("Inferred migrations: relationships that change kind")
struct RelationshipKindTests {
    static func makeV1Store() async throws -> URL {
        let url = MigrationTests.storeURL()
        try await HouseholdV1.fill(PersistentContainer(store: try SQLiteStore(url: url, schema: try HouseholdV1.schema())))
        return url
    }

    @Test("One-to-many becomes many-to-many (filled from the saved keys), unordered ↔ ordered: every link kept")
    func oneToManyBecomesManyToMany() async throws {
        let url = try await Self.makeV1Store()
        let steps = try SQLiteStore.requiredMigration(forStoreAt: url, schema: try HouseholdV2.schema())
        #expect(steps.contains("make relationship Pet.owners to-many"), "\(steps)")
        #expect(steps.contains("make relationship Person.pets ordered"), "\(steps)")
        #expect(steps.contains("make relationship Person.books unordered"), "\(steps)")
        let v2 = PersistentContainer(store: try SQLiteStore(url: url, schema: try HouseholdV2.schema()))
        #expect(try await HouseholdV2.links(v2) == HouseholdV2.migratedLinks)
        // Many-to-many now: a pet with two owners saves and reads back.
        try await v2.save { context in
            let kit = try #require(try context.fetch(FetchRequest<HouseholdV2.Pet>(predicate: #Predicate { $0.name == "Kit" })).first)
            let ann = try #require(try context.fetch(FetchRequest<HouseholdV2.Person>(predicate: #Predicate { $0.name == "Ann" })).first)
            kit.owners.insert(ann)
        }
        let kit = try await v2.performBackgroundTask { context in
            try context.fetch(FetchRequest<HouseholdV2.Pet>(predicate: #Predicate { $0.name == "Kit" })).first.map { $0.owners.map(\.name).sorted() }
        }
        #expect(kit == ["Ann", "Bob"])
        try await v2.close()
    }

    @Test("To-many becoming to-one is refused before anything is written: it could drop links")
    func toManyBecomingToOneIsRefused() async throws {
        let url = try await Self.makeV1Store()
        let before = try SQLiteStore.contentDump(at: url)
        let error = try #require(throws: LoomError.self) { _ = try SQLiteStore(url: url, schema: try HouseholdToOne.schema()) }
        #expect(error.code == .schemaMismatch)
        #expect(error.message.contains("which could drop links"), "\(error.message)")
        #expect(try SQLiteStore.contentDump(at: url) == before)
        let lost = try #require(throws: LoomError.self) { _ = try SQLiteStore(url: url, schema: try HouseholdLostLinks.schema()) }
        #expect(lost.code == .schemaMismatch)
        #expect(lost.message.contains("becomes to-many through Person.book, which holds no saved links"), "\(lost.message)")
        #expect(try SQLiteStore.contentDump(at: url) == before)
    }
}
