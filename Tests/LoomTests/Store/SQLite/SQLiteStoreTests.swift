import Foundation
import GRDB
import Loom
@_spi(LoomStore) import LoomCore
import Testing

@MainActor
@Suite("SQLite store")
struct SQLiteStoreTests {
    @Test("Saved data is there after reopening the file")
    func persistsAcrossOpens() async throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        let id: ObjectID<Book>
        do {
            let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
            let book = Book(isbn: "1", title: "Persistent")
            container.viewContext.insert(book)
            try container.viewContext.save()
            id = book.objectID
            try await container.close()
        }
        let reopened = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
        #expect(try reopened.viewContext.existingObject(with: id).title == "Persistent")
        // Keys stay permanent: a new object never reuses one.
        let next = Book(context: reopened.viewContext)
        #expect(next.objectID.primaryKey > id.primaryKey)
    }

    @Test("A store file left in rollback-journal mode with a hot journal by a killed writer opens, rolled back")
    func hotRollbackJournal() async throws {
        // A transform stage's copy of the old version is in rollback-journal mode until its
        // first open switches it to WAL; a kill during that open leaves a hot journal, which a
        // read-only connection cannot roll back (SQLITE_READONLY_ROLLBACK).
        let folder = TemporaryDirectory.make()
        let url = folder.appending(path: "library.loom"), killed = folder.appending(path: "killed.loom")
        do {
            let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
            for i in 0..<2_000 { container.viewContext.insert(Book(isbn: "\(i)", title: "Title \(i)")) }
            try container.viewContext.save()
            try await container.close()
        }
        let before = try SQLiteStore.contentDump(at: url)
        let queue = try DatabaseQueue(path: url.path)
        try queue.inDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 2")
            try db.execute(sql: "BEGIN IMMEDIATE")
            // A small cache spills changed pages into the file before commit, as a long write does.
            try db.execute(sql: "UPDATE Book SET title = 'half-written ' || title")
            #expect(FileManager.default.fileExists(atPath: url.path + "-journal"))
            // What a kill at this instant leaves: the file, partly overwritten, and its journal.
            try FileManager.default.copyItem(atPath: url.path, toPath: killed.path)
            try FileManager.default.copyItem(atPath: url.path + "-journal", toPath: killed.path + "-journal")
            try db.execute(sql: "ROLLBACK")
        }
        try queue.close()
        #expect(try Data(contentsOf: killed) != Data(contentsOf: url), "the copy was not overwritten before commit: the test proves nothing")
        let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(killed))
        #expect(try container.viewContext.count(for: FetchRequest<Book>(predicate: #Predicate { $0.title.starts(with: "half") })) == 0)
        #expect(try container.viewContext.count(for: FetchRequest<Book>()) == 2_000)
        try await container.close()
        #expect(try SQLiteStore.contentDump(at: killed) == before)
    }

    @Test("A file that is not SQLite is refused and left untouched")
    func notSQLite() throws {
        let url = TemporaryDirectory.make().appending(path: "notes.txt")
        let content = Data("these are my notes, not a database\n".utf8)
        try content.write(to: url)
        let error = try #require(throws: LoomError.self) {
            try SQLiteStore(url: url, schema: Schema(Book.self))
        }
        #expect(error.code == .notADatabase)
        #expect(error.path == url.path)
        #expect(try Data(contentsOf: url) == content)
    }

    @Test("A damaged store whose metadata has a NULL key is refused with an error, not a trap, and left untouched")
    func nullMetadataKey() throws {
        let url = TemporaryDirectory.make().appending(path: "damaged.loom")
        try SQLiteStore(url: url, schema: Schema(Book.self)).close()
        // What a damaged page can hold: a row the table's NOT NULL would have refused on write.
        let queue = try DatabaseQueue(path: url.path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: """
                ALTER TABLE loom_metadata RENAME TO old_metadata;
                CREATE TABLE loom_metadata (key TEXT, value BLOB);
                INSERT INTO loom_metadata SELECT key, value FROM old_metadata;
                INSERT INTO loom_metadata VALUES (NULL, 'x');
                DROP TABLE old_metadata;
                """)
        }
        try queue.close()
        let before = try Data(contentsOf: url)
        let error = try #require(throws: LoomError.self) {
            try SQLiteStore(url: url, schema: Schema(Book.self))
        }
        #expect(error.path == url.path)
        #expect(try Data(contentsOf: url) == before)
    }

    @Test("A SQLite database Loom did not create is refused and left untouched")
    func foreignSQLite() throws {
        let url = TemporaryDirectory.make().appending(path: "other.sqlite")
        // Make a foreign database with the SQLite store machinery's own dependency, GRDB, via Loom:
        // a store with a different schema is still a Loom store, so write raw SQL instead.
        try ForeignDatabase.create(at: url)
        let before = try Data(contentsOf: url)
        let error = try #require(throws: LoomError.self) {
            try SQLiteStore(url: url, schema: Schema(Book.self))
        }
        #expect(error.code == .notALoomStore)
        #expect(error.message.contains("people"))
        #expect(try Data(contentsOf: url) == before)
    }

    @Test("Opening a store with a model it cannot be migrated to names the change and what differs")
    func schemaMismatch() throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        try SQLiteStore(url: url, schema: Schema(Book.self)).close()
        let changed = EntityDescription(name: "Book", modelType: nil, attributes: [
            AttributeDescription(name: "isbn", valueType: String.self, isUnique: true),
            AttributeDescription(name: "title", valueType: Int.self),
        ])
        let typeError = try #require(throws: LoomError.self) {
            try SQLiteStore(url: url, schema: Schema([changed, Shelf.entity]))
        }
        #expect(typeError.code == .schemaMismatch)
        #expect(typeError.message.contains("Book.title changes from string to integer64"))
        #expect(typeError.message.contains("Book.title is string in the store but integer64 in the model"))
        #expect(typeError.message.contains("Book.pages is in the store but not in the model"))
        #expect(typeError.message.contains("entity Shelf is in the model but not in the store"))
        // A change that can be inferred (a new entity) is migrated instead.
        try SQLiteStore(url: url, schema: Schema(Book.self, Shelf.self)).close()
        #expect(try SQLiteStore.savedSchema(at: url).entity(named: "Shelf") != nil)
    }

    @Test("The schema saved in the store opens without the model, as dynamic objects")
    func dynamicAccess() async throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        do {
            let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
            container.viewContext.insert(Book(isbn: "1", title: "Dynamic", pages: 12))
            try container.viewContext.save()
            try await container.close()
        }
        let schema = try SQLiteStore.savedSchema(at: url)
        #expect(schema.versionHash == (try Schema(Book.self)).versionHash)
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        let context = container.viewContext
        let books = try context.fetch(DynamicFetchRequest(entityName: "Book", sortBy: [("title", true)]))
        let book = try #require(books.first as? DynamicObject)
        #expect(book["title"] == .text("Dynamic"))
        #expect(book["pages"] == .integer(12))
        book["pages"] = .integer(13)
        try context.save()
        let wrong = try DynamicObject(entity: try #require(schema.entity(named: "Book")), context: context)
        wrong["isbn"] = .text("2")
        wrong["title"] = .integer(5)
        let error = try #require(throws: LoomError.self) { try context.save() }
        #expect(error.code == .typeMismatch)
        #expect(error.attributeNames == ["title"])
        #expect(throws: LoomError.self) { try context.fetch(DynamicFetchRequest(entityName: "Nope")) }
    }

    @Test("synchronous is NORMAL by default and FULL on request")
    func synchronousMode() throws {
        let dir = TemporaryDirectory.make()
        let normal = try SQLiteStore(url: dir.appending(path: "a.loom"), schema: Schema(Book.self))
        #expect(try normal.pragma("synchronous") == 1)
        #expect(try normal.pragma("journal_mode") == "wal")
        let full = try SQLiteStore(url: dir.appending(path: "b.loom"), schema: Schema(Book.self), options: .init(synchronous: .full))
        #expect(try full.pragma("synchronous") == 2)
    }

    @Test("Past a reader connection's limit of prepared statements they are prepared again, the ones it found by their text's storage too")
    func statementLimit() async throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
        let context = container.viewContext
        for i in 0..<3 { context.insert(Book(isbn: "\(i)", title: "Title \(i)", pages: i)) }
        try context.save()
        let id = try #require(try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.isbn == "2" })).first).objectID
        context.reset()
        // Lists of every length make as many statement texts; each lookup by ID between them
        // reuses one statement, kept among the connection's most recent. Past the limit (256) every
        // statement is finalized: a lookup still holding its old one would run a freed statement.
        for count in 1...300 {
            let isbns = (0..<count).map { "\($0)" }
            let books = try context.fetch(FetchRequest<Book>(predicate: #Predicate { isbns.contains($0.isbn) }))
            #expect(books.count == min(count, 3))
            #expect(try context.existingObject(with: id).title == "Title 2")
            context.reset()
        }
        try await container.close()
    }

    @Test("A row changed outside Loom to the wrong type is an error, not a crash")
    func corruptRow() throws {
        let url = TemporaryDirectory.make().appending(path: "library.loom")
        let container = try PersistentContainer(name: "Library", for: Book.self, location: .file(url))
        container.viewContext.insert(Book(isbn: "1", title: "Fine", pages: 3))
        try container.viewContext.save()
        try ForeignDatabase.execute("UPDATE \"Book\" SET \"pages\" = 'three'", at: url)
        let fresh = container.newBackgroundContext()
        let error = try fresh.performAndWait { context in
            try #require(throws: LoomError.self) { try context.fetch(FetchRequest<Book>()) }
        }
        #expect(error.code == .corruptValue)
        #expect(error.attributeNames == ["pages"])
    }

    @Test("Each kind of value a column cannot hold, set outside Loom, fails the fetch naming its attribute; the others' rows still read",
          arguments: [("int", "'seven'"), ("int", "2.5"), ("double", "'x'"), ("string", "x'41'"), ("data", "3.5"),
                      ("uuid", "x'0011'"), ("uuid", "'not a uuid'"), ("optionalUUID", "x'00112233'"), ("optionalDate", "'today'"),
                      ("optionalString", "x'00'")])
    func corruptValueOfEachKind(column: String, value: String) throws {
        let url = TemporaryDirectory.make().appending(path: "samples.loom")
        let container = try PersistentContainer(name: "Samples", for: Sample.self, location: .file(url))
        let sample = Sample()
        sample.optionalUUID = UUID()
        sample.optionalString = "fine"
        container.viewContext.insert(sample)
        try container.viewContext.save()
        // Values of the right kind in every column, NULL where optional: the row reads.
        try ForeignDatabase.execute("UPDATE \"Sample\" SET \"optionalUUID\" = NULL, \"int\" = 7, \"double\" = 2", at: url)
        #expect(try container.newBackgroundContext().performAndWait { try $0.fetch(FetchRequest<Sample>()).count } == 1)
        try ForeignDatabase.execute("UPDATE \"Sample\" SET \"\(column)\" = \(value)", at: url)
        let error = try container.newBackgroundContext().performAndWait { context in
            try #require(throws: LoomError.self) { try context.fetch(FetchRequest<Sample>()) }
        }
        #expect(error.code == .corruptValue)
        #expect(error.attributeNames == [column])
    }
}
