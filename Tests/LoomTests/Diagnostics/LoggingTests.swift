import Foundation
import Logging
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
@testable import LoomSQLite
import LoomTools
import Testing

/// SQL logging (`LOOM_SQL_DEBUG`, ``LoomLogging``): what each level shows, that values stay out
/// unless asked for, and that with logging off nothing is installed.
///
/// Serialized: the settings are process-wide. A store reads them when it opens, and each test
/// reads back only its own store's messages (other suites' stores opened meanwhile may log too).
@Suite(.serialized, .ownThreads) struct LoggingTests {
    /// Opens a store at `level`, saves a book and fetches it back with a predicate; returns the
    /// messages logged for that store.
    private func run(_ kind: StoreKind, level: Int, values: Bool = false, slow: Duration = .seconds(60)) async throws -> [String] {
        let captured = LogCollector()
        let saved = (LoomLogging.logger, LoomLogging.sqlDebugLevel, LoomLogging.logsSQLValues, LoomLogging.slowStatementThreshold)
        LoomLogging.logger = captured.logger(label: "loom-tests")
        LoomLogging.sqlDebugLevel = level
        LoomLogging.logsSQLValues = values
        LoomLogging.slowStatementThreshold = slow
        let schema = try Schema([Book.self, Shelf.self, Sample.self, Tally.self])
        let store: any PersistentStore
        let name: String
        switch kind {
        case .sqlite:
            let url = TemporaryDirectory.make().appending(path: "log.loom")
            store = try SQLiteStore(url: url, schema: schema)
            name = url.path
        case .postgres:
            let configuration = try PostgresServer.configuration()
            store = try PostgreSQLStore(configuration: configuration, schema: schema)
            name = configuration.schemaName
        case .inMemory:
            fatalError("the in-memory store runs no SQL")
        }
        (LoomLogging.logger, LoomLogging.sqlDebugLevel, LoomLogging.logsSQLValues, LoomLogging.slowStatementThreshold) = saved
        let container = PersistentContainer(store: store)
        let context = container.newBackgroundContext()
        try context.performAndWait { context in
            context.insert(Book(isbn: "secret-isbn-42", title: "Dune", pages: 412))
            try context.save()
            let books = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages > 400 && $0.title == "Dune" }))
            #expect(books.count == 1)
        }
        try await container.close()
        return captured.messages(of: name)
    }

    static var sqlStores: [StoreKind] { StoreKind.persistentCases }

    @Test(arguments: sqlStores)
    func levelOneLogsEachStatementWithoutValues(_ kind: StoreKind) async throws {
        let messages = try await run(kind, level: 1)
        let fetch = try #require(messages.first { $0.hasPrefix("SELECT") && $0.contains("WHERE ((t0.\"pages\" >") })
        #expect(messages.contains { $0.hasPrefix("INSERT") })
        #expect(!fetch.contains("time:"))
        #expect(!messages.contains { $0.contains("secret-isbn-42") }, "values are not logged unless asked for")
    }

    @Test(arguments: sqlStores)
    func levelTwoAddsParameterTypesAndTimings(_ kind: StoreKind) async throws {
        let messages = try await run(kind, level: 2)
        let fetch = try #require(messages.first { $0.hasPrefix("SELECT") && $0.contains("WHERE ((t0.\"pages\" >") && $0.contains("parameters:") })
        #expect(fetch.contains("time:"))
        #expect(!fetch.contains("rows:"))
        #expect(!messages.contains { $0.contains("secret-isbn-42") || $0.contains("Dune") })
        switch kind {
        case .sqlite: #expect(fetch.contains("parameters: INTEGER, TEXT"))
        default: #expect(fetch.contains("parameters: BIGINT, TEXT"))
        }
    }

    @Test(arguments: sqlStores)
    func levelThreeAddsRowCountsAndPlansOfSlowStatements(_ kind: StoreKind) async throws {
        let messages = try await run(kind, level: 3, slow: .zero)
        let fetch = try #require(messages.first { $0.hasPrefix("SELECT") && $0.contains("WHERE ((t0.\"pages\" >") && $0.contains("parameters:") })
        #expect(fetch.contains("rows: 1"))
        #expect(!messages.contains { $0.hasPrefix("COMMIT") && $0.contains("plan") }, "only queries have plans")
        #expect(fetch.contains("plan (slower than 0.000 ms):"))
        switch kind {
        case .sqlite: #expect(fetch.contains("SCAN") || fetch.contains("SEARCH"))
        default: #expect(fetch.contains("Scan") || fetch.contains("Index"))
        }
    }

    @Test func valuesAreLoggedOnlyWhenAskedFor() async throws {
        let messages = try await run(.sqlite, level: 1, values: true)
        #expect(messages.contains { $0.contains("'secret-isbn-42'") })
        #expect(messages.contains { $0.contains("'Dune'") && $0.contains("SELECT") })
    }

    @Test func offLogsNothingAndInstallsNothing() async throws {
        LoomLogging.sqlDebugLevel = 0
        #expect(LoomLogging.sqlLog(store: "any") == nil)
        #expect(SQLTracer.make(path: "/nowhere", trace: nil) == nil)
        let messages = try await run(.sqlite, level: 0)
        #expect(messages.isEmpty)
    }

    @Test func parameterTypesAreReadOffTheExpandedStatement() {
        let sql = #"SELECT "a" FROM "t" WHERE "b" = ? AND "c" IN (?, ?) AND "d" = '?' AND "e" > ?2 AND "f" = ?"#
        let expanded = #"SELECT "a" FROM "t" WHERE "b" = 'it''s, (a) ?' AND "c" IN (NULL, x'00ff') AND "d" = '?' AND "e" > -1.5e+20 AND "f" = 42"#
        #expect(SQLTracer.parameterTypes(sql: sql, expanded: expanded) == ["TEXT", "NULL", "BLOB", "REAL", "INTEGER"])
    }

    @Test func environmentTurnsSQLLoggingOnWithoutCode() async throws {
        let url = TemporaryDirectory.make().appending(path: "env.loom")
        let container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema([Book.self])))
        try await container.close()
        let quiet = try await LoomExecutable.run(["inspect", url.path])
        #expect(quiet.status == 0)
        #expect(!quiet.standardError.contains("SELECT"))
        let logged = try await LoomExecutable.run(["inspect", url.path], environment: ["LOOM_SQL_DEBUG": "2"])
        #expect(logged.status == 0)
        #expect(logged.standardError.contains("SELECT count(*)") || logged.standardError.contains("SELECT COUNT(*)"))
        #expect(logged.standardError.contains("time:"))
        #expect(!logged.standardOutput.contains("SELECT"), "logs go to standard error, not into the output")
    }

    /// Every verb of the `loom` tool shows the SQL it runs with `LOOM_SQL_DEBUG`, as a store
    /// does: each connection a verb opens (the read-only one of dump and verify, the load's
    /// writer) is traced, and the log goes to standard error, never into the verb's output.
    @Test(arguments: [
        ("inspect", #"FROM "Book" AS t0) AS matches"#),
        ("history", "FROM loom_history"),
        ("query", #"FROM "Book" AS t0"#),
        ("dump", #"SELECT "Z_PK", "Z_OPT", "isbn""#),
        ("verify", "PRAGMA integrity_check"),
        ("load", #"INSERT INTO "Book""#),
    ])
    func everyVerbShowsTheSQLItRuns(_ verb: String, _ statement: String) async throws {
        let folder = TemporaryDirectory.make()
        let url = folder.appending(path: "verbs.loom")
        try await LoomExecutable.makeStore(at: url)
        let dump = try await LoomExecutable.run(["dump", url.path])
        try #require(dump.status == 0, "\(dump.standardError)")
        let arguments = switch verb {
        case "query": [verb, url.path, "Book"]
        case "load": [verb, "-", folder.appending(path: "copy.loom").path]
        default: [verb, url.path]
        }
        let input = verb == "load" ? Data(dump.standardOutput.utf8) : nil
        let quiet = try await LoomExecutable.run(arguments, input: input)
        #expect(quiet.status == 0, "\(quiet.standardError)")
        #expect(!quiet.standardError.contains("[loom.sql]"))
        try? FileManager.default.removeItem(at: folder.appending(path: "copy.loom"))
        let logged = try await LoomExecutable.run(arguments, input: input, environment: ["LOOM_SQL_DEBUG": "1"])
        #expect(logged.status == 0, "\(logged.standardError)")
        #expect(logged.standardError.contains(statement), "\(logged.standardError)")
        #expect(logged.standardOutput == quiet.standardOutput, "logs go to standard error, not into the output")
    }

    /// The README's logging example, run: its store's statements reach the application's logger.
    @Test func readmeLoggingExample() async throws {
        let saved = (LoomLogging.logger, LoomLogging.sqlDebugLevel, LoomLogging.logsSQLValues)
        defer { (LoomLogging.logger, LoomLogging.sqlDebugLevel, LoomLogging.logsSQLValues) = saved }
        let storeURL = TemporaryDirectory.make().appending(path: "Cookbook.loom")
        let captured = LogCollector()

        // BEGIN README LOGGING
        // Loom logs through swift-log: hand it your application's logger (any handler, label
        // or metadata), and turn SQL logging on before the container opens its store, in code
        // or with LOOM_SQL_DEBUG=1…3 in the environment.
        var logger = Logger(label: "com.example.cookbook.storage")
        logger[metadataKey: "component"] = "loom"
        LoomLogging.logger = logger
        LoomLogging.sqlDebugLevel = 2        // statements, their parameters' types and timings
        LoomLogging.logsSQLValues = false    // the default: values can be personal data

        let container = try PersistentContainer(name: "Cookbook", for: Recipe.self, location: .file(storeURL))
        // END README LOGGING

        try await container.close()

        // The same, through a logger the test can read.
        LoomLogging.logger = captured.logger(label: "loom-tests")
        let reopened = try PersistentContainer(name: "Cookbook", for: Recipe.self, location: .file(storeURL))
        LoomLogging.sqlDebugLevel = 0
        let found = try await reopened.performBackgroundTask { context in
            context.insert(Recipe(name: "Pancakes", minutes: 20))
            try context.save()
            return try context.fetch(FetchRequest<Recipe>(predicate: #Predicate { $0.minutes < 30 })).count
        }
        #expect(found == 1)
        let fetch = captured.messages(of: storeURL.path).first { $0.hasPrefix("SELECT") && $0.contains("\"minutes\" <") }
        #expect(fetch?.contains("parameters: INTEGER") == true)
        try await reopened.close()
    }
}
