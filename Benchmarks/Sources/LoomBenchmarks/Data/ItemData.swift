import Foundation

/// One application entity as plain values: what every contender stores, fetches and compares.
///
/// Shaped like a real app's row: integers, doubles, two strings longer than 15 bytes (so that
/// Swift keeps them on the heap, as it does real text), a date and an optional. A to-many
/// relationship belongs here too, but Loom has no relationships yet: W4 adds it.
struct ItemData: Sendable, Equatable {
    /// The primary key the raw SQLite and GRDB contenders use (Loom assigns its own, 1...N too).
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

    /// A value that depends on every attribute, so that reading them cannot be optimized away.
    @inline(__always)
    var checksum: Int {
        serial &+ category &+ quantity &+ Int(score) &+ Int(price) &+ title.utf8.count &+ notes.utf8.count
            &+ Int(createdAt.timeIntervalSinceReferenceDate) &+ Int(rating ?? 0)
    }
}

/// The columns every table has, in the order raw SQL statements use.
enum ItemSQL {
    static let table = "Item"
    /// Raw SQLite and GRDB: `id` is the primary key (the rowid). Loom's own table has `Z_PK` and
    /// an optimistic-locking column `Z_OPT` instead, and the same attribute columns and index.
    static let createTable = """
        CREATE TABLE Item (
            id INTEGER PRIMARY KEY,
            serial INTEGER NOT NULL, category INTEGER NOT NULL, quantity INTEGER NOT NULL,
            score REAL NOT NULL, price REAL NOT NULL, title TEXT NOT NULL, notes TEXT NOT NULL,
            createdAt REAL NOT NULL, rating REAL)
        """
    static let createIndex = "CREATE INDEX Item_category_score ON Item (category, score)"
    static let columns = "id, serial, category, quantity, score, price, title, notes, createdAt, rating"
    static let insert = "INSERT INTO Item (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    static let selectAll = "SELECT \(columns) FROM Item ORDER BY id"
    static let selectFirst100 = "SELECT \(columns) FROM Item ORDER BY id LIMIT 100"
    static let selectByID = "SELECT \(columns) FROM Item WHERE id = ?"
    /// The W3 query: one category, a score range, ordered by score (ties by key, as Loom does).
    static let selectRange = "SELECT \(columns) FROM Item WHERE category = ? AND score >= ? AND score < ? ORDER BY score, id"
    static let updateScoreAndTitle = "UPDATE Item SET score = ?, title = ? WHERE id = ?"
    static let updateScore = "UPDATE Item SET score = ? WHERE id = ?"
    static let count = "SELECT count(*) FROM Item"
}

/// One W3-style query: a category and a score range expected to match about 50 rows.
struct RangeQuery: Sendable {
    var category: Int
    var low: Double
    var high: Double
}

/// Everything the workloads need, generated once from a fixed seed.
struct Dataset: Sendable {
    /// The objects of the populated stores (ids 1...count).
    let items: [ItemData]
    /// How many categories `items` spreads over (about 1,000 items each).
    let categoryCount: Int
    /// 1,000 different range queries over `items`, ~50 rows each.
    let queries: [RangeQuery]
    /// Replacement titles for W5's changes, one per changed object.
    let newTitles: [String]
    /// Item ids to look up in W8, uniformly over 1...count: the primary keys of the raw and
    /// GRDB stores; Loom's keys for them come from ``Bench/loomKey(ofItem:)``.
    let lookupKeys: [Int64]

    /// The score width of a query: a category holds ~`count / categoryCount` items spread
    /// uniformly over scores 0..<1000, so a range of width 50 holds ~50 of its ~1,000.
    static let scoreWidth = 50.0

    init(count: Int, seed: UInt64 = 0x10_0D_BE_AC) {
        var random = SplitMix64(seed: seed)
        let categories = max(1, count / 1_000)
        categoryCount = categories
        items = (0..<count).map { i in Dataset.item(id: Int64(i + 1), categoryRange: 0..<categories, random: &random) }
        let width = Dataset.scoreWidth * Double(categories * 1_000) / Double(max(count, 1))
        queries = (0..<1_000).map { _ in
            let low = random.unit() * (1_000 - width)
            return RangeQuery(category: random.int(below: categories), low: low, high: low + width)
        }
        newTitles = (0..<max(1, count / 10)).map { i in "Revised title \(i) \(Dataset.words[random.int(below: Dataset.words.count)])" }
        lookupKeys = (0..<50_000).map { _ in Int64(random.int(below: max(count, 1)) + 1) }
    }

    /// `count` more items for W7's background import, with ids after `startID` and categories
    /// the W7 query never asks for, so that the foreground query keeps returning ~50 rows.
    func importItems(count: Int, startID: Int64, seed: UInt64 = 0x1_4407) -> [ItemData] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { i in
            Dataset.item(id: startID + Int64(i), categoryRange: categoryCount..<(2 * categoryCount), random: &random)
        }
    }

    static func item(id: Int64, categoryRange: Range<Int>, random: inout SplitMix64) -> ItemData {
        let title = "\(word(&random).capitalized) \(word(&random)) \(word(&random)) no. \(id)"
        var notes = ""
        for i in 0..<(6 + random.int(below: 10)) {
            if i > 0 { notes += " " }
            notes += word(&random)
        }
        return ItemData(
            id: id,
            serial: Int(id) * 7 + random.int(below: 7),
            category: categoryRange.lowerBound + random.int(below: categoryRange.count),
            quantity: random.int(below: 10_000),
            score: random.unit() * 1_000,
            price: Double(100 + random.int(below: 99_900)) / 100,
            title: title,
            notes: notes,
            createdAt: Date(timeIntervalSinceReferenceDate: 600_000_000 + random.unit() * 200_000_000),
            rating: random.int(below: 10) < 3 ? nil : random.unit() * 5)
    }

    private static func word(_ random: inout SplitMix64) -> String {
        words[random.int(below: words.count)]
    }

    static let words = [
        "amber", "basalt", "cedar", "delta", "ember", "fjord", "granite", "harbor", "island", "juniper",
        "kestrel", "lantern", "meadow", "nimbus", "orchard", "pebble", "quartz", "river", "saffron", "timber",
        "umber", "valley", "willow", "xenon", "yarrow", "zephyr", "anchor", "bramble", "copper", "dune",
        "estuary", "falcon", "glacier", "hollow", "indigo", "jasper", "kelp", "lichen", "marble", "nectar",
        "obsidian", "prairie", "quill", "rowan", "sierra", "tundra", "upland", "vellum", "wharf", "yonder",
    ]
}
