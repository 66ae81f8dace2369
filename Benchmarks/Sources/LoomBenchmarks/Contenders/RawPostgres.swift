import Foundation
import Logging
import LoomPostgreSQL
import NIOCore
import NIOPosix
import PostgresNIO

/// The raw PostgreSQL contender: one postgres-nio connection, hand-written statements, rows
/// decoded by hand into ``ItemData``, waited for on the calling thread as Loom's store does (a
/// blocking `wait()` on the event loop's future, never an `await` hop per statement).
///
/// Its table has the same columns and types as Loom's: `BIGINT`, `DOUBLE PRECISION`, `TEXT
/// COLLATE "C"`, dates as seconds since 2001, the `(category, score)` index. Bulk writes send
/// one array per column through `unnest`, as Loom's saves do: postgres-nio does not pipeline, so
/// a statement per row would measure round trips, not the database.
final class RawPostgres {
    let connection: PostgresConnection
    let schemaName: String
    private static let logger = Logger(label: "loom-bench.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    private nonisolated(unsafe) static var nextID = 0

    /// Connects to the server of `url` (a `postgres://` URL as `--postgres` takes it), with
    /// `schemaName` first on the search path; creates the schema when `creating`.
    init(url: String, schemaName: String) throws {
        // Loom's URL parsing only: the connection is postgres-nio's own.
        var connectionConfiguration = try PostgreSQLStore.Configuration(url: url).connectionConfiguration
        connectionConfiguration.options.additionalStartupParameters = [("search_path", "\"\(schemaName)\"")]
        Self.nextID += 1
        connection = try PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: connectionConfiguration,
            id: Self.nextID, logger: Self.logger).wait()
        self.schemaName = schemaName
    }

    func close() {
        _ = try? connection.close().wait()
    }

    deinit {
        // postgres-nio asserts that a connection is closed before it goes: one left open (a
        // reader a closure kept) closes now, kept alive until it has.
        let connection = self.connection
        if !connection.isClosed { connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    func query(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws -> PostgresQueryResult {
        try connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: Self.logger).wait()
    }

    /// Drops and creates the schema and the item table in it.
    func createSchema() throws {
        try query("DROP SCHEMA IF EXISTS \"\(schemaName)\" CASCADE")
        try query("CREATE SCHEMA \"\(schemaName)\"")
        try query(PostgresItemSQL.createTable)
        try query(PostgresItemSQL.createIndex)
    }

    func dropSchema() throws {
        try query("DROP SCHEMA IF EXISTS \"\(schemaName)\" CASCADE")
    }

    /// Inserts `items` with one statement per 10,000: an array per column, `unnest`ed (the
    /// optional rating as values and a null mask, since postgres-nio's arrays have no NULLs).
    func insert(_ items: some Collection<ItemData>) throws {
        var start = items.startIndex
        while start != items.endIndex {
            let end = items.index(start, offsetBy: 10_000, limitedBy: items.endIndex) ?? items.endIndex
            let chunk = items[start..<end]
            var binds = PostgresBindings(capacity: 11)
            binds.append(chunk.map(\.id))
            binds.append(chunk.map { Int64($0.serial) })
            binds.append(chunk.map { Int64($0.category) })
            binds.append(chunk.map { Int64($0.quantity) })
            binds.append(chunk.map(\.score))
            binds.append(chunk.map(\.price))
            binds.append(chunk.map(\.title))
            binds.append(chunk.map(\.notes))
            binds.append(chunk.map { $0.createdAt.timeIntervalSinceReferenceDate })
            binds.append(chunk.map { $0.rating ?? 0 })
            binds.append(chunk.map { $0.rating == nil })
            try query(PostgresItemSQL.insertArrays, binds)
            start = end
        }
    }

    /// One row, one statement (autocommit: a transaction of its own).
    func insertOne(_ item: ItemData) throws {
        var binds = PostgresBindings(capacity: 10)
        binds.append(item.id)
        binds.append(Int64(item.serial))
        binds.append(Int64(item.category))
        binds.append(Int64(item.quantity))
        binds.append(item.score)
        binds.append(item.price)
        binds.append(item.title)
        binds.append(item.notes)
        binds.append(item.createdAt.timeIntervalSinceReferenceDate)
        binds.append(item.rating)
        try query(PostgresItemSQL.insertOne, binds)
    }

    func selectAll() throws -> [ItemData] {
        try Self.items(query(PostgresItemSQL.selectAll))
    }

    func select(matching range: RangeQuery) throws -> [ItemData] {
        var binds = PostgresBindings(capacity: 3)
        binds.append(Int64(range.category))
        binds.append(range.low)
        binds.append(range.high)
        return try Self.items(query(PostgresItemSQL.selectRange, binds))
    }

    /// Sets score and title of `items` with one statement.
    func updateScoreAndTitle(_ items: [ItemData]) throws {
        var binds = PostgresBindings(capacity: 3)
        binds.append(items.map(\.id))
        binds.append(items.map(\.score))
        binds.append(items.map(\.title))
        try query(PostgresItemSQL.updateScoreAndTitle, binds)
    }

    func count() throws -> Int {
        try scalar("SELECT count(*) FROM item", Int.self)
    }

    /// The one value of a one-row, one-column statement.
    func scalar<T: PostgresDecodable>(_ sql: String, _ type: T.Type) throws -> T {
        guard let row = try query(sql).rows.first else { throw BenchError("\(sql) returned no row") }
        return try row.decode(T.self)
    }

    static func items(_ result: PostgresQueryResult) throws -> [ItemData] {
        var items: [ItemData] = []
        items.reserveCapacity(result.rows.count)
        for row in result.rows {
            let (id, serial, category, quantity, score, price, title, notes, createdAt, rating)
                = try row.decode((Int64, Int, Int, Int, Double, Double, String, String, Double, Double?).self)
            items.append(ItemData(id: id, serial: serial, category: category, quantity: quantity, score: score, price: price,
                                  title: title, notes: notes, createdAt: Date(timeIntervalSinceReferenceDate: createdAt), rating: rating))
        }
        return items
    }
}

/// The raw PostgreSQL contender's statements.
enum PostgresItemSQL {
    static let columns = "id, serial, category, quantity, score, price, title, notes, created_at, rating"
    static let createTable = """
        CREATE TABLE item (id BIGINT PRIMARY KEY, serial BIGINT NOT NULL, category BIGINT NOT NULL, \
        quantity BIGINT NOT NULL, score DOUBLE PRECISION NOT NULL, price DOUBLE PRECISION NOT NULL, \
        title TEXT COLLATE "C" NOT NULL, notes TEXT COLLATE "C" NOT NULL, created_at DOUBLE PRECISION NOT NULL, \
        rating DOUBLE PRECISION)
        """
    static let createIndex = "CREATE INDEX item_category_score ON item (category, score)"
    static let insertArrays = """
        INSERT INTO item (\(columns)) SELECT i, s, c, q, sc, p, t, n, d, CASE WHEN rn THEN NULL ELSE r END \
        FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::int8[], $5::float8[], $6::float8[], $7::text[], \
        $8::text[], $9::float8[], $10::float8[], $11::bool[]) AS u(i, s, c, q, sc, p, t, n, d, r, rn)
        """
    static let insertOne = "INSERT INTO item (\(columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
    static let selectAll = "SELECT \(columns) FROM item ORDER BY id"
    static let selectRange = "SELECT \(columns) FROM item WHERE category = $1 AND score >= $2 AND score < $3 ORDER BY score"
    static let updateScoreAndTitle = """
        UPDATE item SET score = u.score, title = u.title \
        FROM unnest($1::int8[], $2::float8[], $3::text[]) AS u(id, score, title) WHERE item.id = u.id
        """
}
