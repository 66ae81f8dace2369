import Foundation
import Loom

/// W17: entity inheritance. The W2 data split over three sub-entities of an abstract parent
/// (each adds one attribute), fetched (a) all at once, every attribute read, through the
/// parent (all three sub-entities) and through one leaf (a third of the rows), and (b) with
/// W3's 1,000 range queries through the parent and through the leaf (p50). The flat entity
/// holding the same rows (W2's `Item`) is the baseline.
///
/// Raw SQLite runs the three layouts an object store can choose, by hand SQL:
/// - `single`: one table per hierarchy with an entity column (Core Data's layout); a leaf
///   fetch filters on the entity column (indexed).
/// - `joined`: one table per class, the parent's columns in the parent's table, each
///   sub-entity's in its own, joined by key.
/// - `concrete`: one table per concrete entity holding the inherited columns too (Loom's
///   layout today); a parent fetch is a `UNION ALL` of the three tables.
/// Loom runs its own layout (`concrete`), whose parent fetch asks each table and merges.
final class HierarchyFetches: SynchronousWorkload {
    let id = "W17"
    var title = "Hierarchy: parent fetch over three sub-entities, leaf fetch, flat entity"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [
        Metric(key: "flat", label: "(a) flat entity, all"),
        Metric(key: "single.parent", label: "(a) single table: parent"),
        Metric(key: "single.leaf", label: "(a) single table: leaf"),
        Metric(key: "joined.parent", label: "(a) joined tables: parent"),
        Metric(key: "joined.leaf", label: "(a) joined tables: leaf"),
        Metric(key: "concrete.parent", label: "(a) table per entity: parent", target: .ratioToRaw(2)),
        Metric(key: "concrete.leaf", label: "(a) table per entity: leaf", target: .ratioToRaw(2)),
        Metric(key: "q.flat", label: "(b) flat entity, query p50"),
        Metric(key: "q.single.parent", label: "(b) single table: parent p50"),
        Metric(key: "q.single.leaf", label: "(b) single table: leaf p50"),
        Metric(key: "q.joined.parent", label: "(b) joined tables: parent p50"),
        Metric(key: "q.joined.leaf", label: "(b) joined tables: leaf p50"),
        Metric(key: "q.concrete.parent", label: "(b) table per entity: parent p50", target: .ratioToRaw(2)),
        Metric(key: "q.concrete.leaf", label: "(b) table per entity: leaf p50", target: .ratioToRaw(2)),
    ]
    private var bench: Bench!
    private var rawPath = ""
    private var loomPath = ""

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        title = "Hierarchy: \(Format.count(bench.sizes.objects)) objects over three sub-entities: parent, leaf, flat"
        rawPath = bench.newDatabasePath("W17-raw")
        let db = try RawDatabase(path: rawPath)
        try db.createSchema()
        try db.insert(bench.dataset.items)
        for statement in HierarchySQL.schema { try db.execute(statement) }
        try HierarchySQL.insert(bench.dataset.items, into: db)
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        loomPath = bench.newDatabasePath("W17-loom")
        let container = try PersistentContainer.hierarchyBench(at: loomPath)
        let context = container.viewContext
        for item in bench.dataset.items {
            context.insert(Item(item))
            switch HierarchySQL.entity(of: item) {
            case 1: context.insert(PartA(item))
            case 2: context.insert(PartB(item))
            default: context.insert(PartC(item))
            }
        }
        try context.save()
        try container.closeAndWait()
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let queries = bench.dataset.queries
        var result: [String: Double] = [:]
        round.meter?.begin()
        defer { round.meter?.end() }
        switch contender {
        case .raw:
            let db = try RawDatabase(path: rawPath)
            _ = try db.scalar(ItemSQL.count)
            result["flat"] = try timed { blackHole(try db.prepare(ItemSQL.selectAll).items().checksum) }.1
            result["q.flat"] = try p50(queries) { query in try db.prepare(ItemSQL.selectRange).items(matching: query).checksum }
            for layout in HierarchySQL.Layout.allCases {
                for leaf in [false, true] {
                    let key = "\(layout.rawValue).\(leaf ? "leaf" : "parent")"
                    result[key] = try timed { blackHole(try HierarchySQL.rows(db, layout.selectAll(leaf: leaf))) }.1
                    result["q." + key] = try p50(queries) { query in try HierarchySQL.rows(db, layout.selectRange(leaf: leaf), query) }
                }
            }
        case .loom:
            let container = try PersistentContainer.hierarchyBench(at: loomPath)
            defer { try? container.closeAndWait() }
            let context = container.viewContext
            // Reset before each fetch, so that each starts with nothing registered (W2's "cold").
            func fresh() -> ManagedObjectContext { context.reset(); return context }
            _ = try context.count(for: FetchRequest<Item>())
            result["flat"] = try timed { blackHole(try Self.loaded(FetchRequest<Item>(), in: fresh()).checksum) }.1
            result["concrete.parent"] = try timed { blackHole(try Self.loaded(FetchRequest<Part>(), in: fresh()).checksum) }.1
            result["concrete.leaf"] = try timed { blackHole(try Self.loaded(FetchRequest<PartA>(), in: fresh()).checksum) }.1
            context.reset()
            result["q.flat"] = try p50(queries) { query in try context.fetch(.matching(query)).checksum }
            result["q.concrete.parent"] = try p50(queries) { query in try context.fetch(Part.matching(query)).checksum }
            result["q.concrete.leaf"] = try p50(queries) { query in try context.fetch(PartA.leafMatching(query)).checksum }
        default:
            break
        }
        return result
    }

    /// Every object of a request, loaded (W2 (b)).
    private static func loaded<M: PersistentModel>(_ request: FetchRequest<M>, in context: ManagedObjectContext) throws -> [M] {
        var request = request
        request.returnsObjectsAsFaults = false
        return try context.fetch(request)
    }

    /// The median time of one query per range query.
    private func p50(_ queries: [RangeQuery], _ body: (RangeQuery) throws -> Int) throws -> Double {
        var times: [Double] = []
        times.reserveCapacity(queries.count)
        for query in queries {
            let start = monotonicNanoseconds()
            blackHole(try body(query))
            times.append(seconds(since: start))
        }
        return Statistics.percentile(sorted: times.sorted(), 0.5)
    }
}

// MARK: - Loom's models

/// The hierarchy's abstract parent: `Item`'s attributes and index.
@Model(abstract: true) class Part {
    var serial: Int
    var category: Int
    var quantity: Int
    var score: Double
    var price: Double
    var title: String
    var notes: String
    var createdAt: Date
    var rating: Double?
    #Index<Part>([\.category, \.score])

    init(_ item: ItemData) {
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

    /// The W3 query on this entity and its sub-entities.
    static func matching(_ query: RangeQuery) -> FetchRequest<Part> {
        let category = query.category, low = query.low, high = query.high
        return FetchRequest<Part>(
            predicate: #Predicate<Part> { $0.category == category && $0.score >= low && $0.score < high },
            sortBy: [SortDescriptor(\Part.score)])
    }
}

@Model final class PartA: Part {
    var extraA: Int = 0
    override init(_ item: ItemData) {
        super.init(item)
        extraA = HierarchySQL.extra(of: item)
    }

    /// The W3 query on this leaf. Named apart from `Part.matching(_:)`, which a subclass
    /// inherits: a static method of the same name differing only in its result would make
    /// `PartA.matching(query)` ambiguous inside a generic `fetch`.
    static func leafMatching(_ query: RangeQuery) -> FetchRequest<PartA> {
        let category = query.category, low = query.low, high = query.high
        return FetchRequest<PartA>(
            predicate: #Predicate<PartA> { $0.category == category && $0.score >= low && $0.score < high },
            sortBy: [SortDescriptor(\PartA.score)])
    }
}

@Model final class PartB: Part {
    var extraB: Int = 0
    override init(_ item: ItemData) {
        super.init(item)
        extraB = HierarchySQL.extra(of: item)
    }
}

@Model final class PartC: Part {
    var extraC: Int = 0
    override init(_ item: ItemData) {
        super.init(item)
        extraC = HierarchySQL.extra(of: item)
    }
}

extension [Part] {
    /// Reads every attribute, the sub-entity's own included.
    var checksum: Int {
        reduce(0) { sum, part in
            let extra = (part as? PartA)?.extraA ?? (part as? PartB)?.extraB ?? (part as? PartC)?.extraC ?? 0
            return sum &+ part.serial &+ part.category &+ part.quantity &+ Int(part.score) &+ Int(part.price)
                &+ part.title.utf8.count &+ part.notes.utf8.count &+ Int(part.createdAt.timeIntervalSinceReferenceDate)
                &+ Int(part.rating ?? 0) &+ extra
        }
    }
}

extension [PartA] {
    var checksum: Int { map { $0 as Part }.checksum }
}

extension PersistentContainer {
    /// A container over a SQLite file with the flat `Item` and the `Part` hierarchy.
    static func hierarchyBench(at path: String) throws -> PersistentContainer {
        try PersistentContainer(name: "LoomBench", for: Item.self, Part.self, PartA.self, PartB.self, PartC.self,
                                location: .file(URL(filePath: path)))
    }
}

// MARK: - Raw SQLite's layouts

/// The hand-written SQL of the three layouts.
enum HierarchySQL {
    /// The sub-entity an item goes to: 1, 2 or 3.
    static func entity(of item: ItemData) -> Int { Int(item.id % 3) + 1 }
    /// The value of the sub-entity's own attribute.
    static func extra(of item: ItemData) -> Int { item.serial &* 7 % 1_000 }

    static let common = "serial INTEGER NOT NULL, category INTEGER NOT NULL, quantity INTEGER NOT NULL, score REAL NOT NULL, price REAL NOT NULL, title TEXT NOT NULL, notes TEXT NOT NULL, createdAt REAL NOT NULL, rating REAL"
    static let columns = "serial, category, quantity, score, price, title, notes, createdAt, rating"

    static let schema = [
        "CREATE TABLE HS (id INTEGER PRIMARY KEY, ent INTEGER NOT NULL, \(common), extraA INTEGER, extraB INTEGER, extraC INTEGER)",
        "CREATE INDEX HS_ent ON HS (ent)",
        "CREATE INDEX HS_category_score ON HS (category, score)",
        "CREATE TABLE HJ (id INTEGER PRIMARY KEY, \(common))",
        "CREATE INDEX HJ_category_score ON HJ (category, score)",
        "CREATE TABLE HJA (id INTEGER PRIMARY KEY, extraA INTEGER NOT NULL)",
        "CREATE TABLE HJB (id INTEGER PRIMARY KEY, extraB INTEGER NOT NULL)",
        "CREATE TABLE HJC (id INTEGER PRIMARY KEY, extraC INTEGER NOT NULL)",
    ] + ["A", "B", "C"].flatMap { e in [
        "CREATE TABLE HC\(e) (id INTEGER PRIMARY KEY, \(common), extra\(e) INTEGER NOT NULL)",
        "CREATE INDEX HC\(e)_category_score ON HC\(e) (category, score)",
    ] }

    /// Inserts every item into the three layouts, in one transaction.
    static func insert(_ items: [ItemData], into db: RawDatabase) throws {
        try db.execute("BEGIN IMMEDIATE")
        let values = "?, ?, ?, ?, ?, ?, ?, ?, ?"
        let single = try db.prepare("INSERT INTO HS (id, ent, \(columns), extraA, extraB, extraC) VALUES (?, ?, \(values), ?, ?, ?)")
        let joined = try db.prepare("INSERT INTO HJ (id, \(columns)) VALUES (?, \(values))")
        let names = ["A", "B", "C"]
        let joinedChildren = try names.map { try db.prepare("INSERT INTO HJ\($0) (id, extra\($0)) VALUES (?, ?)") }
        let concrete = try names.map { try db.prepare("INSERT INTO HC\($0) (id, \(columns), extra\($0)) VALUES (?, \(values), ?)") }
        for item in items {
            let e = entity(of: item), x = extra(of: item)
            single.bind(item.id, at: 1)
            single.bind(e, at: 2)
            bindCommon(single, item, from: 3)
            for i in 1...3 { if i == e { single.bind(x, at: Int32(11 + i)) } else { single.bind(nil as Double?, at: Int32(11 + i)) } }
            try single.run()
            joined.bind(item.id, at: 1)
            bindCommon(joined, item, from: 2)
            try joined.run()
            joinedChildren[e - 1].bind(item.id, at: 1)
            joinedChildren[e - 1].bind(x, at: 2)
            try joinedChildren[e - 1].run()
            concrete[e - 1].bind(item.id, at: 1)
            bindCommon(concrete[e - 1], item, from: 2)
            concrete[e - 1].bind(x, at: 11)
            try concrete[e - 1].run()
        }
        try db.execute("COMMIT")
    }

    private static func bindCommon(_ statement: RawStatement, _ item: ItemData, from first: Int32) {
        statement.bind(item.serial, at: first)
        statement.bind(item.category, at: first + 1)
        statement.bind(item.quantity, at: first + 2)
        statement.bind(item.score, at: first + 3)
        statement.bind(item.price, at: first + 4)
        statement.bind(item.title, at: first + 5)
        statement.bind(item.notes, at: first + 6)
        statement.bind(item.createdAt.timeIntervalSinceReferenceDate, at: first + 7)
        statement.bind(item.rating, at: first + 8)
    }

    enum Layout: String, CaseIterable {
        case single, joined, concrete

        /// Selects `id, ent, <columns>, extra` of every object of the parent or of leaf A.
        func selectAll(leaf: Bool) -> String { select(leaf: leaf, range: false) }
        /// The same with W3's range condition and order.
        func selectRange(leaf: Bool) -> String { select(leaf: leaf, range: true) }

        private func select(leaf: Bool, range: Bool) -> String {
            let condition = "category = ? AND score >= ? AND score < ?"
            let order = range ? "ORDER BY score, id" : "ORDER BY id"
            switch self {
            case .single:
                let filter = [leaf ? "ent = 1" : nil, range ? condition : nil].compactMap { $0 }
                let clause = filter.isEmpty ? "" : "WHERE " + filter.joined(separator: " AND ")
                return "SELECT id, ent, \(HierarchySQL.columns), coalesce(extraA, extraB, extraC) FROM HS \(clause) \(order)"
            case .joined:
                let columns = HierarchySQL.columns.split(separator: ", ").map { "HJ.\($0)" }.joined(separator: ", ")
                let clause = range ? "WHERE HJ.category = ? AND HJ.score >= ? AND HJ.score < ?" : ""
                let joinedOrder = range ? "ORDER BY HJ.score, HJ.id" : "ORDER BY HJ.id"
                if leaf {
                    return "SELECT HJ.id, 1, \(columns), HJA.extraA FROM HJ JOIN HJA ON HJA.id = HJ.id \(clause) \(joinedOrder)"
                }
                return """
                    SELECT HJ.id, CASE WHEN HJA.id IS NOT NULL THEN 1 WHEN HJB.id IS NOT NULL THEN 2 ELSE 3 END, \(columns),
                    coalesce(HJA.extraA, HJB.extraB, HJC.extraC) FROM HJ
                    LEFT JOIN HJA ON HJA.id = HJ.id LEFT JOIN HJB ON HJB.id = HJ.id LEFT JOIN HJC ON HJC.id = HJ.id
                    \(clause) \(joinedOrder)
                    """
            case .concrete:
                let clause = range ? "WHERE \(condition)" : ""
                let parts = (leaf ? ["A"] : ["A", "B", "C"]).enumerated().map { i, e in
                    "SELECT id, \(i + 1) AS ent, \(HierarchySQL.columns), extra\(e) FROM HC\(e) \(clause)"
                }
                return parts.joined(separator: " UNION ALL ") + " " + order
            }
        }
    }

    /// Runs a select (with a range query's parameters, repeated for each part of a union) and
    /// decodes every row; returns a checksum of every column.
    static func rows(_ db: RawDatabase, _ sql: String, _ query: RangeQuery? = nil) throws -> Int {
        let statement = try db.prepare(sql)
        if let query {
            let count = Int32(sql.components(separatedBy: "category = ?").count - 1)
            for i in 0..<count {
                statement.bind(query.category, at: 3 * i + 1)
                statement.bind(query.low, at: 3 * i + 2)
                statement.bind(query.high, at: 3 * i + 3)
            }
        }
        var sum = 0
        while try statement.step() {
            let item = ItemData(
                id: statement.int64(0), serial: statement.int(2), category: statement.int(3), quantity: statement.int(4),
                score: statement.double(5), price: statement.double(6), title: statement.text(7), notes: statement.text(8),
                createdAt: Date(timeIntervalSinceReferenceDate: statement.double(9)),
                rating: statement.isNull(10) ? nil : statement.double(10))
            let entity = statement.int(1), extra = statement.int(11)
            sum = sum &+ [item].checksum &+ entity &+ extra
        }
        return sum
    }
}
