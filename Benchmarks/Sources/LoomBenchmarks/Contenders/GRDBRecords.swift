import Foundation
import GRDB

/// GRDB's record path: a `Codable` struct that GRDB encodes and decodes by column name.
///
/// Dates are stored as seconds since 2001 (`timeIntervalSinceReferenceDate`), as Loom and the
/// raw contender store them, instead of GRDB's default text format, so that every contender
/// writes the same bytes.
struct ItemRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "Item"

    var id: Int64
    var serial: Int
    var category: Int
    var quantity: Int
    var score: Double
    var price: Double
    var title: String
    var notes: String
    var createdAt: Date
    var rating: Double?

    static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy {
        .timeIntervalSinceReferenceDate
    }

    static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy {
        .timeIntervalSinceReferenceDate
    }

    init(_ item: ItemData) {
        id = item.id
        serial = item.serial
        category = item.category
        quantity = item.quantity
        score = item.score
        price = item.price
        title = item.title
        notes = item.notes
        createdAt = item.createdAt
        rating = item.rating
    }

    var checksum: Int {
        serial &+ category &+ quantity &+ Int(score) &+ Int(price) &+ title.utf8.count &+ notes.utf8.count
            &+ Int(createdAt.timeIntervalSinceReferenceDate) &+ Int(rating ?? 0)
    }
}

extension ItemRecord {
    /// The W3 query through GRDB's query interface.
    static func matching(_ query: RangeQuery) -> QueryInterfaceRequest<ItemRecord> {
        ItemRecord
            .filter(Column("category") == query.category && Column("score") >= query.low && Column("score") < query.high)
            .order(Column("score"), Column("id"))
    }
}

/// A GRDB record as a class, decoded by column index: the reference point for memory per
/// materialized object (Loom's objects are classes too).
final class ItemClassRecord: FetchableRecord {
    let id: Int64
    let serial: Int
    let category: Int
    let quantity: Int
    let score: Double
    let price: Double
    let title: String
    let notes: String
    let createdAt: Date
    let rating: Double?

    init(row: Row) throws {
        id = row[0]
        serial = row[1]
        category = row[2]
        quantity = row[3]
        score = row[4]
        price = row[5]
        title = row[6]
        notes = row[7]
        createdAt = Date(timeIntervalSinceReferenceDate: row[8])
        rating = row[9]
    }

    var checksum: Int {
        serial &+ category &+ quantity &+ Int(score) &+ Int(price) &+ title.utf8.count &+ notes.utf8.count
            &+ Int(createdAt.timeIntervalSinceReferenceDate) &+ Int(rating ?? 0)
    }
}

extension ItemData {
    /// GRDB's fast path: decodes a row selected with ``ItemSQL/columns`` by column index.
    @inline(__always)
    init(row: Row) {
        self.init(
            id: row[0], serial: row[1], category: row[2], quantity: row[3],
            score: row[4], price: row[5], title: row[6], notes: row[7],
            createdAt: Date(timeIntervalSinceReferenceDate: row[8]),
            rating: row[9])
    }

    /// The statement arguments of ``ItemSQL/insert``.
    var insertArguments: StatementArguments {
        [id, serial, category, quantity, score, price, title, notes, createdAt.timeIntervalSinceReferenceDate, rating]
    }
}

extension Database {
    /// GRDB's fast path: every item a cached statement returns, decoded by column index.
    func items(_ sql: String, arguments: StatementArguments = StatementArguments()) throws -> [ItemData] {
        let statement = try cachedStatement(sql: sql)
        let cursor = try Row.fetchCursor(statement, arguments: arguments)
        var items: [ItemData] = []
        while let row = try cursor.next() { items.append(ItemData(row: row)) }
        return items
    }

    func items(matching query: RangeQuery) throws -> [ItemData] {
        try items(ItemSQL.selectRange, arguments: [query.category, query.low, query.high])
    }

    func createItemSchema() throws {
        try execute(sql: ItemSQL.createTable)
        try execute(sql: ItemSQL.createIndex)
    }
}
