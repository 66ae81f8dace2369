import Foundation
import Loom

/// W19: W4's walk of a to-many relationship, where the relationship leads to an abstract parent
/// entity whose objects are of three sub-entities (the documents spread over them by id), and
/// its inverse to-one is declared on the parent: 1,000 binders × 10 papers, every attribute of
/// every binder and paper read.
///
/// Each sub-entity has a table of its own, so a binder's papers are in three tables. Raw SQLite
/// runs W4's SQL on three tables: per parent, three prepared `SELECT … WHERE binderId = ?` per
/// binder; prefetched, three selects ordered by binder. Loom fires `binder.papers`' fault (one
/// query per table) or prefetches `\.papers`, each paper an object of its own class. The ratios
/// are comparable with W4's, where the documents are in one table.
final class HierarchyToMany: SynchronousWorkload {
    let id = "W19"
    var title = "To-many faulting into a hierarchy"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [
        Metric(key: "perParent", label: "per-parent faults", target: .ratioToRaw(3)),
        Metric(key: "prefetched", label: "prefetched", target: .ratioToRaw(2)),
    ]
    private var sqlPath = ""
    private var loomPath = ""
    private var bench: Bench!

    static let tables = ["paperA", "paperB", "paperC"]

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        title = "To-many faulting into a hierarchy: \(Format.count(ToManyFaulting.folders)) binders × \(ToManyFaulting.documentsPerFolder) papers of 3 sub-entities, every attribute read"
        let data = FolderData.make(folders: ToManyFaulting.folders, documentsPerFolder: ToManyFaulting.documentsPerFolder)
        sqlPath = bench.newDatabasePath("W19-sql")
        do {
            let db = try RawDatabase(path: sqlPath)
            try db.execute("CREATE TABLE binder (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            for table in Self.tables {
                try db.execute("CREATE TABLE \(table) (id INTEGER PRIMARY KEY, binderId INTEGER NOT NULL, title TEXT NOT NULL, size INTEGER NOT NULL, score REAL NOT NULL)")
                try db.execute("CREATE INDEX \(table)_binderId ON \(table) (binderId)")
            }
            try db.execute("BEGIN IMMEDIATE")
            let binder = try db.prepare("INSERT INTO binder (id, name) VALUES (?, ?)")
            let papers = try Self.tables.map { try db.prepare("INSERT INTO \($0) (id, binderId, title, size, score) VALUES (?, ?, ?, ?, ?)") }
            for f in data {
                binder.bind(f.id, at: 1)
                binder.bind(f.name, at: 2)
                try binder.run()
                for d in f.documents {
                    let paper = papers[Self.table(of: d)]
                    paper.bind(d.id, at: 1)
                    paper.bind(f.id, at: 2)
                    paper.bind(d.title, at: 3)
                    paper.bind(d.size, at: 4)
                    paper.bind(d.score, at: 5)
                    try paper.run()
                }
            }
            try db.execute("COMMIT")
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        loomPath = bench.newDatabasePath("W19-loom")
        let container = try PersistentContainer.binders(at: loomPath)
        let context = container.viewContext
        for f in data {
            let binder = Binder(name: f.name)
            context.insert(binder)
            binder.papers = Set(f.documents.map { d -> Paper in
                switch Self.table(of: d) {
                case 0: PaperA(title: d.title, size: d.size, score: d.score)
                case 1: PaperB(title: d.title, size: d.size, score: d.score)
                default: PaperC(title: d.title, size: d.size, score: d.score)
                }
            })
        }
        try context.save()
        try container.closeAndWait()
    }

    /// The sub-entity (table) a document goes to.
    static func table(of document: DocumentData) -> Int { Int(document.id % 3) }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let meter = round.meter
        switch contender {
        case .raw:
            let db = try RawDatabase(path: sqlPath)
            _ = try db.scalar("SELECT count(*) FROM paperA")
            meter?.begin()
            let (a, perParent) = try timed { () throws -> Int in
                let binders = try db.prepare("SELECT id, name FROM binder ORDER BY id")
                let papers = try Self.tables.map { try db.prepare("SELECT id, title, size, score FROM \($0) WHERE binderId = ? ORDER BY id") }
                var sum = 0
                while try binders.step() {
                    let id = binders.int64(0)
                    sum &+= binders.text(1).utf8.count
                    for statement in papers {
                        statement.bind(id, at: 1)
                        while try statement.step() { sum &+= FolderSQL.checksum(statement.text(1), statement.int(2), statement.double(3)) }
                        statement.reset()
                    }
                }
                return sum
            }
            let (b, prefetched) = try timed { () throws -> Int in
                let binders = try db.prepare("SELECT id, name FROM binder ORDER BY id")
                var names: [(Int64, String)] = []
                while try binders.step() { names.append((binders.int64(0), binders.text(1))) }
                var byBinder: [Int64: [DocumentData]] = [:]
                for table in Self.tables {
                    let papers = try db.prepare("SELECT binderId, id, title, size, score FROM \(table) ORDER BY binderId, id")
                    while try papers.step() {
                        byBinder[papers.int64(0), default: []].append(DocumentData(id: papers.int64(1), title: papers.text(2), size: papers.int(3), score: papers.double(4)))
                    }
                }
                var sum = 0
                for (id, name) in names {
                    sum &+= name.utf8.count
                    for d in byBinder[id] ?? [] { sum &+= FolderSQL.checksum(d.title, d.size, d.score) }
                }
                return sum
            }
            meter?.end()
            blackHole((a, b))
            return ["perParent": perParent, "prefetched": prefetched]
        case .loom:
            let container = try PersistentContainer.binders(at: loomPath)
            _ = try container.newBackgroundContext(name: "primer").performAndWait { try $0.count(for: FetchRequest<Paper>()) }
            meter?.begin()
            let (a, perParent) = try container.newBackgroundContext(name: "W19-faults").performAndWait { context in
                try timed { () throws -> Int in
                    try context.fetch(FetchRequest<Binder>()).reduce(0) { $0 &+ $1.checksum }
                }
            }
            let (b, prefetched) = try container.newBackgroundContext(name: "W19-prefetch").performAndWait { context in
                try timed { () throws -> Int in
                    var request = FetchRequest<Binder>()
                    request.relationshipKeyPathsForPrefetching = [\.papers]
                    return try context.fetch(request).reduce(0) { $0 &+ $1.checksum }
                }
            }
            meter?.end()
            blackHole((a, b))
            try container.closeAndWait()
            return ["perParent": perParent, "prefetched": prefetched]
        default:
            return [:]
        }
    }

    func notes(_ result: WorkloadResult) -> [String] {
        ["every contender reads \(Format.count(ToManyFaulting.folders)) binder names and \(Format.count(ToManyFaulting.folders * ToManyFaulting.documentsPerFolder)) papers' title, size and score from 3 tables; per-parent runs 1 + 3 × \(Format.count(ToManyFaulting.folders)) queries, prefetched 4 (W4 has the same data in one table)"]
    }
}

// MARK: Loom models

@Model final class Binder {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Paper.binder) var papers: Set<Paper> = []

    init(name: String) {
        self.name = name
    }

    /// Reads the name and every paper's attributes through the generated accessors.
    var checksum: Int {
        papers.reduce(name.utf8.count) { $0 &+ FolderSQL.checksum($1.title, $1.size, $1.score) }
    }
}

/// The parent declares the attributes and the to-one to the binder; its sub-entities add nothing.
@Model(abstract: true) class Paper {
    var title: String
    var size: Int
    var score: Double
    var binder: Binder?

    init(title: String, size: Int, score: Double) {
        self.title = title
        self.size = size
        self.score = score
    }
}

@Model final class PaperA: Paper {
    override init(title: String, size: Int, score: Double) { super.init(title: title, size: size, score: score) }
}

@Model final class PaperB: Paper {
    override init(title: String, size: Int, score: Double) { super.init(title: title, size: size, score: score) }
}

@Model final class PaperC: Paper {
    override init(title: String, size: Int, score: Double) { super.init(title: title, size: size, score: score) }
}

extension PersistentContainer {
    /// The W19 store at `path`.
    static func binders(at path: String) throws -> PersistentContainer {
        try PersistentContainer(name: "LoomBenchW19", for: Paper.self, PaperA.self, PaperB.self, PaperC.self, Binder.self, location: .file(URL(filePath: path)))
    }
}
