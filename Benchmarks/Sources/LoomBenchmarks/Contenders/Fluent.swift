#if canImport(FluentKit)
import FluentKit
import FluentPostgresDriver
import FluentSQLiteDriver
import Foundation
import Logging
import LoomPostgreSQL
import NIOCore
import NIOPosix

/// The contenders that take part only where this build links them: Fluent here
/// (Benchmarks/Package.swift), nothing in Loom's own package (CI's smoke round).
let fluentContenders: [Contender] = [.fluent]

/// The Fluent contender: Vapor's fluent-kit with its SQLite driver (on sqlite-nio's own, bundled
/// SQLite, not the system library raw SQLite, GRDB and Loom link) or its PostgreSQL driver, one
/// connection, every future waited for on the calling thread as the raw postgres-nio contender
/// does (``RawPostgres``): no `await` hop per statement is timed.
///
/// On SQLite it sets the same four pragmas as raw SQLite and GRDB (``BenchSettings``) on its one
/// connection; the report reads them back, with the library's version.
final class FluentStore {
    let databases: Databases
    let database: any Database
    private static let logger = Logger(label: "loom-bench.fluent", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A store on the SQLite file at `path`, with the benchmark's settings.
    init(sqlite path: String, synchronous: String = "NORMAL") throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let databases = Databases(threadPool: .singleton, on: group)
        self.databases = databases
        databases.use(.sqlite(SQLiteConfiguration(storage: .file(path: path)), sqlLogLevel: nil), as: .sqlite)
        // One event loop, so one connection (the driver keeps one per loop): the pragmas below
        // are the settings of every statement this store runs.
        guard let database = databases.database(.sqlite, logger: Self.logger, on: group.next()) else {
            databases.shutdown()
            throw BenchError("Fluent has no SQLite database")
        }
        self.database = database
        do {
            for pragma in BenchSettings.pragmas(synchronous: synchronous) { try execute(pragma) }
        } catch {
            // AsyncKit's pools assert that they were shut down before they go.
            databases.shutdown()
            throw error
        }
    }

    /// A store on the PostgreSQL server of `url` (as `--postgres` takes it), working in the
    /// schema `schemaName` (first on the search path).
    init(postgres url: String, schemaName: String) throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let databases = Databases(threadPool: .singleton, on: group)
        self.databases = databases
        // Loom's URL parsing only, as the raw contender does: the connection is Fluent's own.
        let core = try PostgreSQLStore.Configuration(url: url).connectionConfiguration
        databases.use(
            .postgres(configuration: SQLPostgresConfiguration(coreConfiguration: core, searchPath: [schemaName]),
                      maxConnectionsPerEventLoop: 1, sqlLogLevel: .trace),
            as: .psql)
        guard let database = databases.database(.psql, logger: Self.logger, on: group.next()) else {
            databases.shutdown()
            throw BenchError("Fluent has no PostgreSQL database")
        }
        self.database = database
    }

    func close() {
        databases.shutdown()
    }

    private var sql: any SQLDatabase {
        get throws {
            guard let sql = database as? any SQLDatabase else { throw BenchError("Fluent's database is not an SQLDatabase") }
            return sql
        }
    }

    /// Runs one statement through Fluent's SQL layer (schema set-up and pragmas, never timed).
    func execute(_ statement: String) throws {
        try sql.raw(SQLQueryString(statement)).run().wait()
    }

    /// The first column of the first row of `statement`, as text.
    func scalar(_ statement: String) throws -> String {
        guard let row = try sql.raw(SQLQueryString(statement)).first().wait() else { return "?" }
        guard let column = row.allColumns.first else { return "?" }
        if let text = try? row.decode(column: column, as: String.self) { return text }
        if let number = try? row.decode(column: column, as: Int.self) { return String(number) }
        return "?"
    }

    /// The item table (``FluentItem``) on SQLite: raw SQLite's table, with `created_at` as the
    /// date column's name (the PostgreSQL contenders' spelling, which the model uses on both).
    func createSQLiteItemTable() throws {
        try execute(ItemSQL.createTable.replacingOccurrences(of: "createdAt", with: "created_at"))
        try execute(ItemSQL.createIndex)
    }

    /// Inserts `models` in one transaction with Fluent's batch create (`[Model].create(on:)`,
    /// one multi-row `INSERT` per 1,000 models: a statement takes at most 32,766 parameters on
    /// SQLite and 65,535 on PostgreSQL), the batches one after the other.
    func insertInBatches(_ models: [FluentItem]) throws {
        let batches = stride(from: 0, to: models.count, by: 1_000).map { Array(models[$0..<min($0 + 1_000, models.count)]) }
        try database.transaction { tx in
            Self.sequentially(batches, on: tx) { $0.create(on: tx) }
        }.wait()
    }

    /// Saves `models` (Fluent updates the fields that changed) in one transaction, one after
    /// the other.
    func saveInTransaction(_ models: [FluentItem]) throws {
        try database.transaction { tx in
            Self.sequentially(models, on: tx) { $0.save(on: tx) }
        }.wait()
    }

    /// Runs `body` for each element once the previous one's future has succeeded.
    private static func sequentially<T: Sendable>(
        _ elements: [T], on database: any Database, _ body: @escaping @Sendable (T) -> EventLoopFuture<Void>
    ) -> EventLoopFuture<Void> {
        elements.reduce(database.eventLoop.makeSucceededVoidFuture()) { previous, element in
            previous.flatMap { body(element) }
        }
    }

}

/// An item as a Fluent model. Dates are stored as seconds since 2001, as every other contender
/// stores them, in a `Double` field.
final class FluentItem: Model, @unchecked Sendable {
    static let schema = "item"

    @ID(custom: "id", generatedBy: .user) var id: Int64?
    @Field(key: "serial") var serial: Int
    @Field(key: "category") var category: Int
    @Field(key: "quantity") var quantity: Int
    @Field(key: "score") var score: Double
    @Field(key: "price") var price: Double
    @Field(key: "title") var title: String
    @Field(key: "notes") var notes: String
    @Field(key: "created_at") var createdAtSeconds: Double
    @OptionalField(key: "rating") var rating: Double?

    init() {}

    init(_ item: ItemData) {
        id = item.id
        serial = item.serial
        category = item.category
        quantity = item.quantity
        score = item.score
        price = item.price
        title = item.title
        notes = item.notes
        createdAtSeconds = item.createdAt.timeIntervalSinceReferenceDate
        rating = item.rating
    }

    var createdAt: Date { Date(timeIntervalSinceReferenceDate: createdAtSeconds) }

    var checksum: Int {
        serial &+ category &+ quantity &+ Int(score) &+ Int(price) &+ title.utf8.count &+ notes.utf8.count
            &+ Int(createdAt.timeIntervalSinceReferenceDate) &+ Int(rating ?? 0)
    }

    /// The W3 query through Fluent's query builder.
    static func matching(_ query: RangeQuery, on database: any Database) -> QueryBuilder<FluentItem> {
        FluentItem.query(on: database)
            .filter(\.$category == query.category)
            .filter(\.$score >= query.low)
            .filter(\.$score < query.high)
            .sort(\.$score)
            .sort(\.$id)
    }
}

/// A W4 folder as a Fluent model, its documents a `@Children` relationship.
final class FluentFolder: Model, @unchecked Sendable {
    static let schema = "folder"

    @ID(custom: "id", generatedBy: .user) var id: Int64?
    @Field(key: "name") var name: String
    @Children(for: \.$folder) var documents: [FluentDocument]

    init() {}
}

/// A W4 document as a Fluent model.
final class FluentDocument: Model, @unchecked Sendable {
    static let schema = "document"

    @ID(custom: "id", generatedBy: .user) var id: Int64?
    @Parent(key: "folderId") var folder: FluentFolder
    @Field(key: "title") var title: String
    @Field(key: "size") var size: Int
    @Field(key: "score") var score: Double

    init() {}
}

extension EnvironmentInfo {
    /// The version of the SQLite Fluent's SQLite driver links (sqlite-nio's amalgamation).
    static var fluentSQLiteVersion: String? { SQLiteConnection.libraryVersionString() }

    /// The four settings read back from a new Fluent store's connection.
    @MainActor
    static func fluentSettings(bench: Bench) throws -> ConnectionSettings? {
        let path = bench.newDatabasePath("settings-fluent")
        defer { bench.remove(path) }
        let store = try FluentStore(sqlite: path)
        defer { store.close() }
        try store.createSQLiteItemTable()
        return ConnectionSettings(
            pageSize: try store.scalar("PRAGMA page_size"), cacheSize: try store.scalar("PRAGMA cache_size"),
            journalMode: try store.scalar("PRAGMA journal_mode"), synchronous: try store.scalar("PRAGMA synchronous"))
    }
}

extension Array where Element == FluentItem {
    var checksum: Int { reduce(0) { $0 &+ $1.checksum } }
}

#else
import Foundation

/// Loom's own package builds the benchmark without Fluent (Benchmarks/Package.swift links it).
let fluentContenders: [Contender] = []

extension EnvironmentInfo {
    static var fluentSQLiteVersion: String? { nil }

    @MainActor
    static func fluentSettings(bench: Bench) throws -> ConnectionSettings? { nil }
}
#endif
