import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Synchronization
import Testing

/// Two versions of one model: the same entities (`Note`), declared in one enum per version.
enum NotesV1 {
    @Model final class Note {
        var title: String
        var subtitle: String?
        var draft: String?
        var count: Int16 = 0
        var weight: Float = 0

        init(title: String, subtitle: String? = nil, count: Int16 = 0) {
            self.title = title
            self.subtitle = subtitle
            self.count = count
        }
    }

    static func schema() throws -> Schema { try Schema([Note.self]) }
}

extension NotesV1 {
    /// Three notes (one without a subtitle) and a duplicated title, saved; closes the container.
    static func fill(_ container: PersistentContainer) async throws {
        try await container.save { context in
            context.insert(Note(title: "Groceries", subtitle: "weekly", count: 3))
            context.insert(Note(title: "Ideas", count: 300))
            let draft = Note(title: "Ideas", subtitle: "second")
            draft.draft = "half-written"
            draft.weight = 1.5
            context.insert(draft)
        }
        try await container.close()
    }
}

extension NotesV2 {
    /// Every note as one line (heading, subtitle, count, weight, body, priority, no folder, tags).
    static func summaries(_ container: PersistentContainer) async throws -> [String] {
        try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Note>(sortBy: [SortDescriptor(\.heading), SortDescriptor(\.subtitle)]))
                .map { "\($0.heading)|\($0.subtitle)|\($0.count)|\($0.weight)|\($0.body ?? "nil")|\($0.priority ?? -1)|\($0.folder == nil)|\($0.tags.count)" }
        }
    }

    /// ``NotesV1/fill(_:)``'s notes after the migration to V2.
    static let migratedSummaries = ["Groceries|weekly|3|0.0|nil|2|true|0", "Ideas|none|300|0.0|nil|2|true|0", "Ideas|second|0|1.5|nil|2|true|0"]

    /// Files the Groceries note in a new folder with a new tag, gives it a body and a count only
    /// V2 can hold, and saves.
    static func useNewRelationships(_ container: PersistentContainer) async throws {
        try await container.save { context in
            let note = try #require(try context.fetch(FetchRequest<Note>(predicate: #Predicate { $0.heading == "Groceries" })).first)
            let folder = Folder(name: "Home")
            let tag = Tag(name: "errand")
            context.insert(folder)
            context.insert(tag)
            note.folder = folder
            note.tags.insert(tag)
            note.body = "milk"
            note.count = 70_000
        }
    }

    /// The Groceries note's body, folder, tags and count.
    static func groceries(_ container: PersistentContainer) async throws -> String {
        try await container.performBackgroundTask { context in
            let note = try #require(try context.fetch(FetchRequest<Note>(predicate: #Predicate { $0.heading == "Groceries" })).first)
            return "\(note.body ?? "nil")|\(note.folder?.name ?? "nil")|\(note.tags.map(\.name))|\(note.count)"
        }
    }

    static let groceriesAfterUse = #"milk|Home|["errand"]|70000"#
}

enum NotesV2 {
    /// `title` renamed `heading`; `subtitle` required with a default; `draft` removed; `count`
    /// and `weight` widened; `body` added, and `priority` with a default (existing rows take it);
    /// a to-one, a to-many and a many-to-many added.
    @Model final class Note {
        @Attribute(originalName: "title") var heading: String
        var subtitle: String = "none"
        var count: Int = 0
        var weight: Double = 0
        var body: String?
        var priority: Int? = 2
        var folder: Folder?
        @Relationship(inverse: \Tag.notes) var tags: Set<Tag> = []

        init(heading: String) { self.heading = heading }
    }

    @Model final class Folder {
        var name: String
        @Relationship(inverse: \Note.folder) var notes: Set<Note> = []

        init(name: String) { self.name = name }
    }

    @Model final class Tag {
        @Attribute(.unique) var name: String
        var notes: Set<Note> = []

        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Note.self, Folder.self, Tag.self]) }
}

/// V1 with `draft` renamed `scratch`: renamed in place, without a rebuild.
enum NotesRenamed {
    @Model final class Note {
        var title: String
        var subtitle: String?
        @Attribute(originalName: "draft") var scratch: String?
        var count: Int16 = 0
        var weight: Float = 0

        init(title: String) { self.title = title }
    }
}

/// Versions that cannot be migrated from V1, each for one reason.
enum NotesBroken {
    /// A new required attribute without a default.
    enum RequiredWithoutDefault {
        @Model final class Note {
            var title: String
            var subtitle: String?
            var draft: String?
            var count: Int16 = 0
            var weight: Float = 0
            var author: String

            init(title: String, author: String) {
                self.title = title
                self.author = author
            }
        }
    }

    /// `title` made unique.
    enum UniqueTitle {
        @Model final class Note {
            @Attribute(.unique) var title: String
            var subtitle: String?
            var draft: String?
            var count: Int16 = 0
            var weight: Float = 0

            init(title: String) { self.title = title }
        }
    }

    /// `subtitle` made required without a default.
    enum RequiredSubtitle {
        @Model final class Note {
            var title: String
            var subtitle: String
            var draft: String?
            var count: Int16 = 0
            var weight: Float = 0

            init(title: String, subtitle: String) {
                self.title = title
                self.subtitle = subtitle
            }
        }
    }

    /// `weight` narrowed from a real number to an integer.
    enum NarrowedWeight {
        @Model final class Note {
            var title: String
            var subtitle: String?
            var draft: String?
            var count: Int16 = 0
            var weight: Int16 = 0

            init(title: String) { self.title = title }
        }
    }
}

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

/// Relationships of every storage kind, before and after renames.
enum LibraryRelsV1 {
    @Model final class Author {
        var name: String
        @Relationship(inverse: \Book.author) var books: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var author: Author?
        @Relationship(inverse: \Tag.books) var tags: Set<Tag> = []
        init(title: String) { self.title = title }
    }

    @Model final class Tag {
        var name: String
        var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Author.self, Book.self, Tag.self]) }
}

/// `Author.books` (ordered) renamed `works`, `Book.author` (its to-one inverse) `writer`, and
/// `Book.tags` (many-to-many, the side that names the join table) `labels`.
enum LibraryRelsV2 {
    @Model final class Author {
        var name: String
        @Relationship(inverse: \Book.writer, originalName: "books") var works: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        @Relationship(originalName: "author") var writer: Author?
        @Relationship(inverse: \Tag.books, originalName: "tags") var labels: Set<Tag> = []
        init(title: String) { self.title = title }
    }

    @Model final class Tag {
        var name: String
        var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Author.self, Book.self, Tag.self]) }
}

/// V2 with entities renamed: `Author` → `Writer`, and `Tag` → `Audience`, which now sorts
/// before `Book` and so names the many-to-many's join table from its side.
enum LibraryRelsV3 {
    @Model(originalName: "Author") final class Writer {
        var name: String
        @Relationship(inverse: \Book.writer) var works: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var writer: Writer?
        @Relationship(inverse: \Audience.books) var labels: Set<Audience> = []
        init(title: String) { self.title = title }
    }

    @Model(originalName: "Tag") final class Audience {
        var name: String
        var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Writer.self, Book.self, Audience.self]) }
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

/// One-to-many relationships, one of them ordered.
enum HouseholdV1 {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owner) var pets: Set<Pet> = []
        @Relationship(inverse: \Book.reader) var books: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        var owner: Person?
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var reader: Person?
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
}

/// `Pet.owner` becomes to-many `owners` (so pets ↔ owners is many-to-many, and `Person.pets`
/// ordered); `Person.books` becomes unordered.
enum HouseholdV2 {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owners) var pets: [Pet] = []
        @Relationship(inverse: \Book.reader) var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        @Relationship(originalName: "owner") var owners: Set<Person> = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var reader: Person?
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
}

/// `Person.books` made to-one (`book`), and `Book.reader` to-many: refused, it could drop links.
enum HouseholdToOne {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owner) var pets: Set<Pet> = []
        @Relationship(inverse: \Book.readers, originalName: "books") var book: Book?
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        var owner: Person?
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        @Relationship(originalName: "reader") var readers: Set<Person> = []
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
}

/// `Book.reader` made to-many, its inverse a new to-one `Person.book` that holds no saved
/// links: refused.
enum HouseholdLostLinks {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owner) var pets: Set<Pet> = []
        @Relationship(inverse: \Book.readers) var book: Book?
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        var owner: Person?
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        @Relationship(originalName: "reader") var readers: Set<Person> = []
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
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

extension LibraryRelsV1 {
    /// Ann's three books in a custom order, two of them tagged; saved, the container closed.
    static func fill(_ container: PersistentContainer) async throws {
        try await container.save { context in
            let ann = Author(name: "Ann")
            let books = ["B1", "B2", "B3"].map { Book(title: $0) }
            let tags = ["red", "blue"].map { Tag(name: $0) }
            context.insert(ann)
            books.forEach(context.insert)
            tags.forEach(context.insert)
            ann.books = [books[1], books[0], books[2]]
            books[0].tags = [tags[0]]
            books[1].tags = [tags[0], tags[1]]
        }
        try await container.close()
    }
}

extension LibraryRelsV3 {
    /// Reads every link of ``LibraryRelsV1/fill(_:)``'s objects after the renames, adds a new
    /// audience to B3 and saves; the writer's key last.
    static func readAndAddGreen(_ container: PersistentContainer) async throws -> [String] {
        try await container.save { context in
            let writer = try #require(try context.fetch(FetchRequest<Writer>()).first)
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.title)]))
            let audiences = try context.fetch(FetchRequest<Audience>(sortBy: [SortDescriptor(\.name)]))
            // New objects take keys after the saved ones.
            let newcomer = Audience(name: "green")
            context.insert(newcomer)
            books[2].labels.insert(newcomer)
            return [
                writer.works.map(\.title).joined(separator: ","),
                books.map { "\($0.title):\($0.writer?.name ?? "-"):\($0.labels.map(\.name).sorted().joined(separator: "+"))" }.joined(separator: " "),
                audiences.map { "\($0.name):\($0.books.map(\.title).sorted().joined(separator: "+"))" }.joined(separator: " "),
                "\(writer.objectID.erased.primaryKey)",
            ]
        }
    }

    static let expectedAfterGreen = ["B2,B1,B3", "B1:Ann:red B2:Ann:blue+red B3:Ann:green", "blue:B2 red:B1+B2", "1"]

    /// The saved keys kept; the key allocator's position moved with the entity (a new object
    /// does not take a saved key).
    static func expectKeysKept(_ container: PersistentContainer) async throws {
        let audiences = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Audience>(sortBy: [SortDescriptor(\.name)])).map { ($0.name, $0.objectID.erased.primaryKey) }
        }
        #expect(audiences.map(\.0) == ["blue", "green", "red"])
        #expect(audiences[0].1 == 2 && audiences[2].1 == 1 && audiences[1].1 > 2)
    }
}

extension HouseholdV1 {
    /// Ann owns Rex and Tom and has B3 then B1; Bob owns Kit. Saved, the container closed.
    static func fill(_ container: PersistentContainer) async throws {
        try await container.save { context in
            let ann = Person(name: "Ann"), bob = Person(name: "Bob")
            let pets = ["Rex", "Tom", "Kit"].map { Pet(name: $0) }
            let books = ["B1", "B2", "B3"].map { Book(title: $0) }
            for object in [ann, bob] { context.insert(object) }
            pets.forEach(context.insert)
            books.forEach(context.insert)
            pets[0].owner = ann
            pets[1].owner = ann
            pets[2].owner = bob
            ann.books = [books[2], books[0]]
        }
        try await container.close()
    }
}

extension HouseholdV2 {
    /// Every person's pets and books, every pet's owners.
    static func links(_ container: PersistentContainer) async throws -> [String] {
        try await container.performBackgroundTask { context in
            let people = try context.fetch(FetchRequest<Person>(sortBy: [SortDescriptor(\.name)]))
            let pets = try context.fetch(FetchRequest<Pet>(sortBy: [SortDescriptor(\.name)]))
            return people.map { "\($0.name):\($0.pets.map(\.name).joined(separator: ",")):\($0.books.map(\.title).sorted().joined(separator: ","))" }
                + pets.map { "\($0.name):\($0.owners.map(\.name).sorted().joined(separator: ","))" }
        }
    }

    static let migratedLinks = ["Ann:Rex,Tom:B1,B3", "Bob:Kit:", "Kit:Bob", "Rex:Ann", "Tom:Ann"]
}
