import Foundation
import Loom

/// W13: a transform stage over a store of M objects saved with the previous model version: the
/// new version drops `title` and adds `heading`, which the stage's code computes from the old
/// `title` (readable only in the old version), in chunks of 1,000, each committed with its
/// cursor.
///
/// Loom: `PersistentContainer(for:migrationPlan:)` with
/// `MigrationStage.custom(fromVersion:toVersion:transforming:chunkSize:transform:)`: a copy of the
/// store (`VACUUM INTO`), the table rebuilt for the new version, then per chunk one fetch of the
/// old objects from the copy, one of the new ones, the change, and a save with the cursor.
/// Raw SQLite: the same steps by hand (`VACUUM INTO`, the rebuild, then per chunk one `SELECT`
/// from the attached copy and one `UPDATE` per row, in a transaction) — no objects, no cursor.
/// The memory figure is the limit: a transform of M objects must not hold them all.
final class TransformMigration: Workload {
    let id = "W13"
    var title = "Migrate through a transform stage"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [Metric(key: "transform", label: "transform every object", target: nil)]
    let memoryNote = "peak heap growth during the whole migration (issue target: at most 64 MiB at 1M objects)"
    private var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        title = "Migrate a store of \(Format.count(bench.sizes.objects)) objects through a transform stage (chunks of 1,000)"
    }

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W13-\(contender.rawValue)")
        defer {
            bench.remove(path)
            for suffix in ["-migration-lock", "-migration-source", "-source"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let meter = round.meter
        switch contender {
        case .raw:
            meter?.begin()
            let seconds = try timed { try Self.rawTransform(path) }.1
            meter?.end()
            return ["transform": seconds]
        case .loom:
            meter?.begin()
            let start = monotonicNanoseconds()
            let container = try await PersistentContainer(
                name: "LoomBench", for: ItemsWithHeading.self, migrationPlan: ItemHeadingPlan.self, location: .file(URL(filePath: path)))
            try await container.close()
            let elapsed = seconds(since: start)
            meter?.end()
            return ["transform": elapsed]
        default:
            return [:]
        }
    }

    private static func rawTransform(_ path: String) throws {
        let source = path + "-source"
        let db = try RawDatabase(path: path)
        try db.execute("VACUUM INTO '\(source)'")
        try db.execute("""
            BEGIN IMMEDIATE;
            CREATE TABLE Item_new (
                id INTEGER PRIMARY KEY,
                serial INTEGER NOT NULL, category INTEGER NOT NULL, quantity INTEGER NOT NULL,
                score REAL NOT NULL, price REAL NOT NULL, heading TEXT NOT NULL, notes TEXT NOT NULL,
                createdAt REAL NOT NULL, rating REAL);
            INSERT INTO Item_new (id, serial, category, quantity, score, price, heading, notes, createdAt, rating)
                SELECT id, serial, category, quantity, score, price, '', notes, createdAt, rating FROM Item;
            DROP TABLE Item;
            ALTER TABLE Item_new RENAME TO Item;
            CREATE INDEX Item_category_score ON Item (category, score);
            COMMIT
            """)
        try db.execute("ATTACH '\(source)' AS source")
        let select = try db.prepare("SELECT id, title FROM source.Item WHERE id > ? ORDER BY id LIMIT 1000")
        let update = try db.prepare("UPDATE Item SET heading = ? WHERE id = ?")
        var cursor: Int64 = 0
        while true {
            try db.execute("BEGIN IMMEDIATE")
            select.bind(cursor, at: 1)
            var rows: [(Int64, String)] = []
            while try select.step() { rows.append((select.int64(0), select.text(1))) }
            select.reset()
            for (id, title) in rows {
                update.bind(title.uppercased(), at: 1)
                update.bind(id, at: 2)
                try update.run()
            }
            try db.execute("COMMIT")
            guard let last = rows.last else { break }
            cursor = last.0
        }
        try db.execute("DETACH source")
    }
}

/// The benchmark's ``Item`` as a model version.
enum ItemsVersion1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Item.self] }
}

/// ``Item`` without `title`, with `heading`.
enum ItemsWithHeading: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Item.self] }

    @Model final class Item {
        var serial: Int
        var category: Int
        var quantity: Int
        var score: Double
        var price: Double
        var heading: String = ""
        var notes: String
        var createdAt: Date
        var rating: Double?
        #Index<Item>([\.category, \.score])

        init(serial: Int) {
            self.serial = serial
            category = 0
            quantity = 0
            score = 0
            price = 0
            notes = ""
            createdAt = Date()
        }
    }
}

enum ItemHeadingPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ItemsVersion1.self, ItemsWithHeading.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ItemsVersion1.self, toVersion: ItemsWithHeading.self, transforming: Item.self, chunkSize: 1_000) { items, _, new in
            for (item, migrated) in zip(items, try new.migratedObjects(items, as: ItemsWithHeading.Item.self)) {
                migrated.heading = item.title.uppercased()
            }
        }]
    }
}
