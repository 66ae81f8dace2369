import Foundation
import Loom

/// W12: a store of M objects saved with the previous model, opened with the next one.
///
/// "add a column": the model gains an optional attribute (Loom: `ALTER TABLE … ADD COLUMN`
/// inside the open's transaction; raw SQLite: the same statement in a transaction).
/// "rebuild": the model renames an attribute (`@Attribute(originalName:)`) and makes the optional
/// `rating` required with a default, which Loom migrates by rebuilding the table (a new table,
/// one `INSERT … SELECT` with NULLs taking the default, the old one dropped, the new one renamed,
/// its index made again); raw SQLite runs the same steps by hand, which is the limit. (A rename
/// alone is done in place, `ALTER TABLE … RENAME COLUMN`, as fast as "add a column".) Loom's figure is the whole open (file checks, preflight, migration, pool), on a fresh
/// copy of the populated store each round.
final class Migration: SynchronousWorkload {
    let id = "W12"
    var title = "Open a store saved with the previous model: inferred migration"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [
        Metric(key: "add", label: "add a column", target: .median(1.0)),
        Metric(key: "rebuild", label: "rebuild the table", target: .ratioToRaw(1 / 0.6)),
    ]
    private var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        title = "Open a store of \(Format.count(bench.sizes.objects)) objects saved with the previous model: inferred migration"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let meter = round.meter
        var result: [String: Double] = [:]
        let added = try bench.populatedCopy(for: contender, tag: "W12-add-\(contender.rawValue)")
        let rebuilt = try bench.populatedCopy(for: contender, tag: "W12-rebuild-\(contender.rawValue)")
        defer {
            bench.remove(added)
            bench.remove(rebuilt)
        }
        switch contender {
        case .raw:
            meter?.begin()
            result["add"] = try timed {
                let db = try RawDatabase(path: added)
                try db.execute("BEGIN IMMEDIATE; ALTER TABLE Item ADD COLUMN note TEXT; COMMIT")
            }.1
            result["rebuild"] = try timed {
                let db = try RawDatabase(path: rebuilt)
                try db.execute("""
                    BEGIN IMMEDIATE;
                    CREATE TABLE Item_new (
                        id INTEGER PRIMARY KEY,
                        serial INTEGER NOT NULL, category INTEGER NOT NULL, quantity INTEGER NOT NULL,
                        score REAL NOT NULL, price REAL NOT NULL, heading TEXT NOT NULL, notes TEXT NOT NULL,
                        createdAt REAL NOT NULL, rating REAL NOT NULL);
                    INSERT INTO Item_new (id, serial, category, quantity, score, price, heading, notes, createdAt, rating)
                        SELECT id, serial, category, quantity, score, price, title, notes, createdAt, COALESCE(rating, 0) FROM Item;
                    DROP TABLE Item;
                    ALTER TABLE Item_new RENAME TO Item;
                    CREATE INDEX Item_category_score ON Item (category, score);
                    COMMIT
                    """)
            }.1
            meter?.end()
        case .loom:
            meter?.begin()
            result["add"] = try timed {
                let container = try PersistentContainer(name: "LoomBench", for: ItemWithNote.Item.self, location: .file(URL(filePath: added)))
                try container.closeAndWait()
            }.1
            result["rebuild"] = try timed {
                let container = try PersistentContainer(name: "LoomBench", for: ItemRenamed.Item.self, location: .file(URL(filePath: rebuilt)))
                try container.closeAndWait()
            }.1
            meter?.end()
        default:
            break
        }
        return result
    }
}

/// The next model version for "add a column": ``Item`` with an optional `note`.
enum ItemWithNote {
    @Model final class Item {
        var serial: Int
        var category: Int
        var quantity: Int
        var score: Double
        var price: Double
        var title: String
        var notes: String
        var createdAt: Date
        var rating: Double?
        var note: String?
        #Index<Item>([\.category, \.score])

        init(serial: Int) {
            self.serial = serial
            category = 0
            quantity = 0
            score = 0
            price = 0
            title = ""
            notes = ""
            createdAt = Date()
        }
    }
}

/// The next model version for "rebuild": ``Item`` with `title` renamed `heading`, and `rating`
/// required with a default.
enum ItemRenamed {
    @Model final class Item {
        var serial: Int
        var category: Int
        var quantity: Int
        var score: Double
        var price: Double
        @Attribute(originalName: "title") var heading: String
        var notes: String
        var createdAt: Date
        var rating: Double = 0
        #Index<Item>([\.category, \.score])

        init(serial: Int) {
            self.serial = serial
            category = 0
            quantity = 0
            score = 0
            price = 0
            heading = ""
            notes = ""
            createdAt = Date()
        }
    }
}
