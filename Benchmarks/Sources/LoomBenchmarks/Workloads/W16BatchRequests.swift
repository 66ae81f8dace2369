import Foundation
import Loom

/// A parcel with a unique code, for W16's upsert.
@Model final class Parcel {
    @Attribute(.unique) var code: Int
    var weight: Double
    var destination: String

    init(code: Int, weight: Double, destination: String) {
        self.code = code
        self.weight = weight
        self.destination = destination
    }
}

/// A crate of bottles, for W16's cascading delete.
@Model final class Crate {
    var label: String
    @Relationship(deleteRule: .cascade, inverse: \Bottle.crate) var bottles: Set<Bottle> = []

    init(label: String) { self.label = label }
}

@Model final class Bottle {
    var wine: String
    var volume: Double
    var crate: Crate?

    init(wine: String, volume: Double) {
        self.wine = wine
        self.volume = volume
    }
}

/// A writer with a unique handle, and articles with a unique slug, for W16's uniqued import.
@Model final class Columnist {
    @Attribute(.unique) var handle: String
    @Relationship(inverse: \Article.writer) var articles: Set<Article> = []

    init(handle: String) { self.handle = handle }
}

@Model final class Article {
    @Attribute(.unique) var slug: String
    var title: String
    var words: Int
    var writer: Columnist?

    init(slug: String, title: String, words: Int) {
        self.slug = slug
        self.title = title
        self.words = words
    }
}

/// One article as a feed gives it, in JSON.
struct ArticleJSON: Codable, Sendable {
    let slug: String
    let title: String
    let words: Int
    let writer: String
}

/// W16: batch requests — work done in the store, without objects.
///
/// "insert" writes M new objects (the W1 items) with one batch insert request; raw SQLite runs
/// the same rows through one prepared, reused INSERT in one transaction (W1's raw save). Rows
/// per second. "upsert" writes M parcels with a unique code to a store that already holds half
/// of them (every existing one gets a new weight): Loom's `BatchInsertRequest(uniquing:
/// .update)`; raw SQLite's `INSERT … ON CONFLICT(code) DO UPDATE`. Rows per second.
/// "link" batch-inserts 10 × M/10 … here M × 10 bottles, each related by ID to one of M crates
/// (`.relate(\.crate, to:)`; raw: an INSERT with the crate's key), rows per second; "cascade"
/// deletes the M crates with one batch delete whose cascade rule deletes their 10 × M bottles
/// (raw: `DELETE FROM bottle WHERE crate IN (SELECT …)`, then the crates, in one transaction).
/// "import" decodes a JSON feed of 40,000 articles (half already saved, every title changed),
/// each linked by its writer's handle to one of 1,000 writers, and imports it: Loom's
/// `ImportRequest` uniqued by slug with `.linking(\.writer, to: \Columnist.handle, by: \.writer)`;
/// raw SQLite, a hand-written importer: the writers' keys in one query, then one upsert per
/// article. Seconds, decoding included.
/// Loom's side writes what a save writes: versions checked, history recorded, contexts told.
final class BatchRequests: SynchronousWorkload {
    let id = "W16"
    var title = "Batch requests"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [
        Metric(key: "insert", label: "batch insert", unit: .operationsPerSecond, target: .atLeastOfRaw(0.5)),
        Metric(key: "upsert", label: "upsert, half existing", unit: .operationsPerSecond),
        Metric(key: "link", label: "insert related by ID", unit: .operationsPerSecond),
        Metric(key: "cascade", label: "cascading delete", target: .median(3)),
        Metric(key: "import", label: "uniqued import from JSON", target: .median(1)),
    ]
    let articles = 40_000
    let writers = 1_000
    let bottlesPerCrate = 10
    private var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        let m = bench.sizes.objects
        title = "Batch requests: insert \(Format.count(m)); upsert \(Format.count(m)) with half existing; \(Format.count(m * bottlesPerCrate)) inserted related by ID; delete \(Format.count(m)) parents cascading to \(Format.count(m * bottlesPerCrate)) children"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let path = bench.newDatabasePath("W16-\(contender.rawValue)-\(round.index)")
        defer { bench.remove(path) }
        let items = bench.dataset.items
        let m = items.count
        let meter = round.meter
        var result: [String: Double] = [:]
        switch contender {
        case .raw:
            let db = try RawDatabase(path: path)
            try db.createSchema()
            try db.execute("CREATE TABLE parcel (id INTEGER PRIMARY KEY, code INTEGER NOT NULL UNIQUE, weight REAL NOT NULL, destination TEXT NOT NULL)")
            try db.execute("CREATE TABLE crate (id INTEGER PRIMARY KEY, label TEXT NOT NULL)")
            try db.execute("CREATE TABLE bottle (id INTEGER PRIMARY KEY, wine TEXT NOT NULL, volume REAL NOT NULL, crate INTEGER)")
            try db.execute("CREATE INDEX bottle_crate ON bottle(crate)")
            try upsertRaw(db, codes: 0..<(m / 2), weight: 1)
            meter?.begin()
            result["insert"] = Double(m) / (try timed { try db.insert(items) }).1
            result["upsert"] = Double(m) / (try timed { try upsertRaw(db, codes: 0..<m, weight: 2) }).1
            let (_, link) = try timed {
                try db.execute("BEGIN IMMEDIATE")
                let crate = try db.prepare("INSERT INTO crate (id, label) VALUES (?, ?)")
                let bottle = try db.prepare("INSERT INTO bottle (wine, volume, crate) VALUES (?, ?, ?)")
                for c in 1...m {
                    crate.bind(c, at: 1); crate.bind("crate \(c)", at: 2)
                    try crate.run()
                    for b in 0..<bottlesPerCrate {
                        bottle.bind("wine \(b)", at: 1); bottle.bind(0.75, at: 2); bottle.bind(c, at: 3)
                        try bottle.run()
                    }
                }
                try db.execute("COMMIT")
            }
            result["link"] = Double(m * bottlesPerCrate) / link
            let (_, cascade) = try timed {
                try db.execute("BEGIN IMMEDIATE")
                try db.execute("DELETE FROM bottle WHERE crate IN (SELECT id FROM crate)")
                try db.execute("DELETE FROM crate")
                try db.execute("COMMIT")
            }
            meter?.end()
            result["cascade"] = cascade
            guard try db.scalar("SELECT count(*) FROM bottle") == "0" else { throw BenchError("W16: raw cascade left bottles") }
            try db.execute("CREATE TABLE writer (id INTEGER PRIMARY KEY, handle TEXT NOT NULL UNIQUE)")
            try db.execute("CREATE TABLE article (id INTEGER PRIMARY KEY, slug TEXT NOT NULL UNIQUE, title TEXT NOT NULL, words INTEGER NOT NULL, writer INTEGER)")
            try db.execute("CREATE INDEX article_writer ON article(writer)")
            try db.execute("BEGIN IMMEDIATE")
            let writer = try db.prepare("INSERT INTO writer (handle) VALUES (?)")
            for w in 0..<writers { writer.bind("w\(w)", at: 1); try writer.run() }
            try db.execute("COMMIT")
            try upsertArticlesRaw(db, try JSONDecoder().decode([ArticleJSON].self, from: Self.feed(0..<(articles / 2), writers: writers, edition: 1)))
            let feed = Self.feed(0..<articles, writers: writers, edition: 2)
            result["import"] = try timed { try upsertArticlesRaw(db, try JSONDecoder().decode([ArticleJSON].self, from: feed)) }.1
        case .loom:
            let container = try PersistentContainer(name: "LoomBench", for: Item.self, Parcel.self, Crate.self, Bottle.self, Columnist.self, Article.self, location: .file(URL(filePath: path)))
            let context = container.newBackgroundContext()
            let existing = Self.parcels(0..<(m / 2), weight: 1)
            try context.performAndWait { context in _ = try context.execute(BatchInsertRequest(rows: existing)) }
            // Every request's rows are made before the heap meter starts: it measures what the
            // requests themselves allocate, not their input.
            let rows = items.map { item -> [BatchValue<Item>] in
                [.set(\.serial, to: item.serial), .set(\.category, to: item.category), .set(\.quantity, to: item.quantity),
                 .set(\.score, to: item.score), .set(\.price, to: item.price), .set(\.title, to: item.title),
                 .set(\.notes, to: item.notes), .set(\.createdAt, to: item.createdAt), .set(\.rating, to: item.rating)]
            }
            // Counts only (`.counts`), as an ingesting app asks: a request then holds one chunk's
            // IDs at a time, and its heap stays bounded by the chunk.
            let parcels = Self.parcels(0..<m, weight: 2)
            let crates = try context.performAndWait { context in
                try context.execute(BatchInsertRequest(rows: (1...m).map { [BatchValue<Crate>.set(\.label, to: "crate \($0)")] })).objectIDs
            }
            let bottles = crates.flatMap { crate -> [[BatchValue<Bottle>]] in
                let id = ObjectID<Crate>(crate)!
                return (0..<bottlesPerCrate).map { b in [.set(\.wine, to: "wine \(b)"), .set(\.volume, to: 0.75), .relate(\.crate, to: id)] }
            }
            meter?.begin()
            var insertRequest = BatchInsertRequest(rows: rows)
            insertRequest.resultType = .counts
            let (inserted, insert) = try timed { try context.performAndWait { [insertRequest] in try $0.execute(insertRequest).insertedCount } }
            guard inserted == m else { throw BenchError("W16: the batch insert inserted \(inserted) of \(m)") }
            result["insert"] = Double(m) / insert
            var upsertRequest = BatchInsertRequest(rows: parcels, uniquing: .update)
            upsertRequest.resultType = .counts
            let (upserted, upsert) = try timed { try context.performAndWait { [upsertRequest] in try $0.execute(upsertRequest) } }
            guard upserted.insertedCount == m - m / 2, upserted.updatedCount + upserted.unchanged == m / 2 else { throw BenchError("W16: the upsert inserted \(upserted.insertedCount) and updated \(upserted.updatedCount)") }
            result["upsert"] = Double(m) / upsert
            var linkRequest = BatchInsertRequest(rows: bottles)
            linkRequest.resultType = .counts
            let (_, link) = try timed { try context.performAndWait { [linkRequest] in _ = try $0.execute(linkRequest) } }
            result["link"] = Double(m * bottlesPerCrate) / link
            var cascadeRequest = BatchDeleteRequest<Crate>()
            cascadeRequest.resultType = .counts
            let (deleted, cascade) = try timed { try context.performAndWait { [cascadeRequest] in try $0.execute(cascadeRequest).deletedCount } }
            meter?.end()
            guard deleted == m * (bottlesPerCrate + 1) else { throw BenchError("W16: the cascade deleted \(deleted)") }
            result["cascade"] = cascade
            try context.performAndWait { context in
                _ = try context.execute(BatchInsertRequest(rows: (0..<self.writers).map { [BatchValue<Columnist>.set(\.handle, to: "w\($0)")] }))
                let first = try JSONDecoder().decode([ArticleJSON].self, from: Self.feed(0..<(self.articles / 2), writers: self.writers, edition: 1))
                try context.execute(Self.importRequest(first))
            }
            let feed = Self.feed(0..<articles, writers: writers, edition: 2)
            let (imported, seconds) = try timed {
                try context.performAndWait { context in try context.execute(Self.importRequest(try JSONDecoder().decode([ArticleJSON].self, from: feed))) }
            }
            guard imported.inserted == articles / 2, imported.updated == articles / 2 else { throw BenchError("W16: the import inserted \(imported.inserted) and updated \(imported.updated)") }
            result["import"] = seconds
            try container.closeAndWait()
        default:
            break
        }
        return result
    }

    /// The feed as JSON: articles `range`, each by one of `writers`; edition 2 changes every title.
    nonisolated private static func feed(_ range: Range<Int>, writers: Int, edition: Int) -> Data {
        try! JSONEncoder().encode(range.map { ArticleJSON(slug: "a\($0)", title: "Article \($0), edition \(edition)", words: 100 + $0 % 900, writer: "w\($0 % writers)") })
    }

    nonisolated private static func importRequest(_ articles: [ArticleJSON]) -> ImportRequest<Article, ArticleJSON> {
        ImportRequest(articles) { article in
            [.set(\.slug, to: article.slug), .set(\.title, to: article.title), .set(\.words, to: article.words)]
        }.linking(\.writer, to: \Columnist.handle, by: \.writer)
    }

    /// What a hand-written importer does: the writers' keys in one query, then one upsert per article.
    private func upsertArticlesRaw(_ db: RawDatabase, _ articles: [ArticleJSON]) throws {
        var writerKeys: [String: Int64] = [:]
        let select = try db.prepare("SELECT id, handle FROM writer")
        while try select.step() { writerKeys[select.text(1)] = select.int64(0) }
        try db.execute("BEGIN IMMEDIATE")
        let statement = try db.prepare("INSERT INTO article (slug, title, words, writer) VALUES (?, ?, ?, ?) ON CONFLICT(slug) DO UPDATE SET title = excluded.title, words = excluded.words, writer = excluded.writer")
        for article in articles {
            statement.bind(article.slug, at: 1); statement.bind(article.title, at: 2); statement.bind(article.words, at: 3)
            statement.bind(writerKeys[article.writer]!, at: 4)
            try statement.run()
        }
        try db.execute("COMMIT")
    }

    nonisolated private static func parcels(_ codes: Range<Int>, weight: Double) -> [[BatchValue<Parcel>]] {
        codes.map { [.set(\.code, to: $0), .set(\.weight, to: weight * Double($0)), .set(\.destination, to: "depot \($0 % 97)")] }
    }

    private func upsertRaw(_ db: RawDatabase, codes: Range<Int>, weight: Double) throws {
        try db.execute("BEGIN IMMEDIATE")
        let statement = try db.prepare("INSERT INTO parcel (code, weight, destination) VALUES (?, ?, ?) ON CONFLICT(code) DO UPDATE SET weight = excluded.weight, destination = excluded.destination")
        for code in codes {
            statement.bind(code, at: 1); statement.bind(weight * Double(code), at: 2); statement.bind("depot \(code % 97)", at: 3)
            try statement.run()
        }
        try db.execute("COMMIT")
    }
}
