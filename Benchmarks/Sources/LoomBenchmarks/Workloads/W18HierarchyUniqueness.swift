import Foundation
import Loom

/// W18: a uniqueness constraint declared on a parent entity, which holds across its
/// sub-entities. M objects (W1's data, unique by serial) inserted and saved once into a new
/// file: (a) into a flat entity with a unique attribute (one table, one unique index), and (b)
/// spread over three sub-entities of an abstract parent that declares the unique attribute
/// (three tables, each with its unique index, and the constraint's own table with its unique
/// index, filled by a trigger on each sub-entity's table). Raw SQLite runs the same two layouts
/// by hand SQL, the triggers included: the ratio is Loom's overhead, and (b) / (a) in each
/// contender is what holding the constraint across tables costs.
final class HierarchyUniqueness: SynchronousWorkload {
    let id = "W18"
    var title = "Unique across a hierarchy: insert and save"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [
        Metric(key: "flat", label: "(a) flat entity, unique: save"),
        // The same ratio as (a)'s: holding the constraint across tables adds no cost of Loom's own.
        Metric(key: "hierarchy", label: "(b) three sub-entities, unique on the parent: save", target: .ratioToRaw(3.5)),
    ]
    private var bench: Bench!
    private var items: [ItemData] = []

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        items = bench.dataset.items
        title = "Unique across a hierarchy: insert \(Format.count(items.count)) objects and save once (new file each round)"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let items = self.items
        var result: [String: Double] = [:]
        round.meter?.begin()
        defer { round.meter?.end() }
        for layout in ["flat", "hierarchy"] {
            let path = bench.newDatabasePath("W18-\(contender.rawValue)-\(layout)")
            defer { bench.remove(path) }
            switch contender {
            case .raw:
                let db = try RawDatabase(path: path)
                let statements = layout == "flat" ? UniqueSQL.flatSchema : UniqueSQL.hierarchySchema
                for statement in statements { try db.execute(statement) }
                result[layout] = try timed { try UniqueSQL.insert(items, into: db, hierarchy: layout == "hierarchy") }.1
            case .loom:
                let container = try PersistentContainer(
                    name: "LoomBench", for: UniqueItem.self, Member.self, MemberA.self, MemberB.self, MemberC.self,
                    location: .file(URL(filePath: path)))
                let context = container.viewContext
                result[layout] = try timed {
                    for item in items {
                        if layout == "flat" {
                            context.insert(UniqueItem(item))
                        } else {
                            switch HierarchySQL.entity(of: item) {
                            case 1: context.insert(MemberA(item))
                            case 2: context.insert(MemberB(item))
                            default: context.insert(MemberC(item))
                            }
                        }
                    }
                    try context.save()
                }.1
                try container.closeAndWait()
            default:
                break
            }
        }
        return result
    }
}

// MARK: - Loom's models

@Model final class UniqueItem {
    @Attribute(.unique) var serial: Int
    var title: String
    var score: Double

    init(_ item: ItemData) {
        serial = item.serial
        title = item.title
        score = item.score
    }
}

/// The parent declares the constraint; it holds across its three sub-entities.
@Model(abstract: true) class Member {
    @Attribute(.unique) var serial: Int
    var title: String
    var score: Double

    init(_ item: ItemData) {
        serial = item.serial
        title = item.title
        score = item.score
    }
}

@Model final class MemberA: Member {
    override init(_ item: ItemData) { super.init(item) }
}

@Model final class MemberB: Member {
    override init(_ item: ItemData) { super.init(item) }
}

@Model final class MemberC: Member {
    override init(_ item: ItemData) { super.init(item) }
}

// MARK: - Raw SQLite's layouts

/// The hand-written SQL of both layouts; the hierarchy's triggers are Loom's own design.
enum UniqueSQL {
    static let flatSchema = [
        "CREATE TABLE U (id INTEGER PRIMARY KEY, serial INTEGER NOT NULL, title TEXT NOT NULL, score REAL NOT NULL)",
        "CREATE UNIQUE INDEX U_serial ON U (serial)",
    ]

    static let hierarchySchema = [
        "CREATE TABLE UH (ent TEXT NOT NULL, id INTEGER NOT NULL, serial INTEGER)",
        "CREATE UNIQUE INDEX UH_serial ON UH (serial)",
        "CREATE INDEX UH_key ON UH (id, ent)",
    ] + ["A", "B", "C"].flatMap { e in [
        "CREATE TABLE U\(e) (id INTEGER PRIMARY KEY, serial INTEGER NOT NULL, title TEXT NOT NULL, score REAL NOT NULL)",
        "CREATE UNIQUE INDEX U\(e)_serial ON U\(e) (serial)",
        "CREATE TRIGGER U\(e)_insert AFTER INSERT ON U\(e) BEGIN INSERT INTO UH (ent, id, serial) VALUES ('\(e)', NEW.id, NEW.serial); END",
        "CREATE TRIGGER U\(e)_update AFTER UPDATE OF serial ON U\(e) BEGIN UPDATE UH SET serial = NEW.serial WHERE id = NEW.id AND ent = '\(e)'; END",
        "CREATE TRIGGER U\(e)_delete AFTER DELETE ON U\(e) BEGIN DELETE FROM UH WHERE id = OLD.id AND ent = '\(e)'; END",
    ] }

    /// Inserts every item in one transaction: into `U`, or into the sub-entity's table.
    static func insert(_ items: [ItemData], into db: RawDatabase, hierarchy: Bool) throws {
        try db.execute("BEGIN IMMEDIATE")
        let tables = hierarchy ? ["UA", "UB", "UC"] : ["U"]
        let statements = try tables.map { try db.prepare("INSERT INTO \($0) (id, serial, title, score) VALUES (?, ?, ?, ?)") }
        for item in items {
            let statement = statements[hierarchy ? HierarchySQL.entity(of: item) - 1 : 0]
            statement.bind(item.id, at: 1)
            statement.bind(item.serial, at: 2)
            statement.bind(item.title, at: 3)
            statement.bind(item.score, at: 4)
            try statement.run()
        }
        try db.execute("COMMIT")
    }
}
