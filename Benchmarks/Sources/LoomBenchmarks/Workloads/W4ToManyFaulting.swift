import Foundation
import GRDB
import Loom

/// W4: walk a to-many relationship from every object of a fetch: 1,000 folders × 10
/// documents, every attribute of every folder and document read.
///
/// - "per parent" is Core Data's classic N+1: the folders are fetched, then each folder's
///   documents are loaded when first touched, one query per folder. Raw SQLite and GRDB's
///   fast path run one prepared `SELECT … WHERE folderId = ?` per folder; GRDB's record path
///   fetches `DocumentRecord`s filtered by folder per folder; Loom fires the to-many fault of
///   `folder.documents` (its documents are faults that fill from the rows that query brought).
/// - "prefetched" loads all the documents in one more query: raw SQLite and GRDB's fast path
///   select every document ordered by folder and group them; GRDB's record path uses its
///   association, `FolderRecord.including(all: FolderRecord.documents)`; Loom sets
///   `relationshipKeyPathsForPrefetching = [\.documents]`.
///
/// The folders and documents live in their own store, built once per contender kind (the C
/// API builds the one raw SQLite and GRDB share, Loom its own) and only read by the rounds.
///
/// - "graph insert + save" builds that data set again in a new file each round, raw SQLite and
///   Loom only: one transaction of prepared INSERTs, and for Loom each folder inserted into a
///   context with its new documents assigned to `folder.documents`, then one save. It is how
///   an import of parents and children is written.
/// - "graph insert via to-one + save" builds it from the other side, as many imports do: each
///   new document's `folder` set to its folder (raw SQLite runs the same INSERTs again).
/// - "parents alone: insert + save" is the same without the documents, ten times the folders
///   (10,000): what the lists of objects never related cost.
final class ToManyFaulting: SynchronousWorkload {
    let id = "W4"
    var title = "To-many relationship faulting"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord] + fluentContenders + [.loom]
    let metrics = [
        Metric(key: "perParent", label: "per-parent faults", target: .ratioToRaw(3)),
        Metric(key: "prefetched", label: "prefetched", target: .ratioToRaw(2)),
        Metric(key: "graphInsert", label: "graph insert + save", target: .ratioToRaw(3)),
        Metric(key: "graphInsertToOne", label: "graph insert via to-one + save", target: .ratioToRaw(3)),
        Metric(key: "parentsInsert", label: "parents alone: insert + save", target: .ratioToRaw(3)),
    ]
    private var data: [FolderData] = []
    /// The parents-alone data set: the folders ten times over, without documents.
    private var parents: [FolderData] = []
    var sqlPath = ""
    private var loomPath = ""
    private var bench: Bench!

    static let folders = 1_000
    static let documentsPerFolder = 10

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        title = "To-many faulting: \(Format.count(Self.folders)) folders × \(Self.documentsPerFolder) documents, every attribute read"
        data = FolderData.make(folders: Self.folders, documentsPerFolder: Self.documentsPerFolder)
        parents = (0..<10).flatMap { copy in
            data.map { FolderData(id: Int64(copy * Self.folders) + $0.id, name: $0.name, documents: []) }
        }
        sqlPath = bench.newDatabasePath("W4-sql")
        do {
            let db = try RawDatabase(path: sqlPath)
            for statement in FolderSQL.schema { try db.execute(statement) }
            try Self.rawInsert(data, into: db)
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        loomPath = bench.newDatabasePath("W4-loom")
        let container = try PersistentContainer.folders(at: loomPath)
        try Self.loomInsert(data, into: container.viewContext)
        try container.closeAndWait()
    }

    /// The data set in one transaction of prepared INSERTs.
    static func rawInsert(_ data: [FolderData], into db: RawDatabase) throws {
        try db.execute("BEGIN IMMEDIATE")
        let folder = try db.prepare(FolderSQL.insertFolder)
        let document = try db.prepare(FolderSQL.insertDocument)
        for f in data {
            folder.bind(f.id, at: 1)
            folder.bind(f.name, at: 2)
            try folder.run()
            for d in f.documents {
                document.bind(d.id, at: 1)
                document.bind(f.id, at: 2)
                document.bind(d.title, at: 3)
                document.bind(d.size, at: 4)
                document.bind(d.score, at: 5)
                try document.run()
            }
        }
        try db.execute("COMMIT")
    }

    /// The data set as a user's import writes it: each folder inserted with its new documents
    /// as `folder.documents`, then one save.
    static func loomInsert(_ data: [FolderData], into context: ManagedObjectContext) throws {
        for f in data {
            let folder = Folder(name: f.name)
            context.insert(folder)
            if f.documents.isEmpty { continue }
            folder.documents = Set(f.documents.map { Document(title: $0.title, size: $0.size, score: $0.score) })
        }
        try context.save()
    }

    /// The data set as an import that sets each document's to-one writes it: each folder
    /// inserted, each new document's `folder` set to it (which inserts the document), then one
    /// save.
    static func loomInsertViaToOne(_ data: [FolderData], into context: ManagedObjectContext) throws {
        for f in data {
            let folder = Folder(name: f.name)
            context.insert(folder)
            for d in f.documents { Document(title: d.title, size: d.size, score: d.score).folder = folder }
        }
        try context.save()
    }

    /// "graph insert + save" (or, given the parents alone, "parents alone: insert + save"; or,
    /// `viaToOne`, "graph insert via to-one + save") for raw SQLite and Loom, in a new file. Raw
    /// SQLite's statements are the same either way.
    private func graphInsert(_ contender: Contender, parentsAlone: Bool = false, viaToOne: Bool = false) throws -> Double {
        let data = parentsAlone ? parents : data
        let path = bench.newDatabasePath("W4-insert-\(contender.rawValue)")
        defer { bench.remove(path) }
        switch contender {
        case .raw:
            let db = try RawDatabase(path: path)
            for statement in FolderSQL.schema { try db.execute(statement) }
            return try timed { try Self.rawInsert(data, into: db) }.1
        case .loom:
            let container = try PersistentContainer.folders(at: path)
            let time = try timed {
                try viaToOne ? Self.loomInsertViaToOne(data, into: container.viewContext) : Self.loomInsert(data, into: container.viewContext)
            }.1
            try container.closeAndWait()
            return time
        default:
            throw BenchError("W4's graph insert has no \(contender.rawValue) contender")
        }
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let meter = round.meter
        switch contender {
        case .raw:
            let db = try RawDatabase(path: sqlPath)
            _ = try db.scalar("SELECT count(*) FROM document")
            meter?.begin()
            let (a, perParent) = try timed { () throws -> Int in
                let folders = try db.prepare(FolderSQL.selectFolders)
                let documents = try db.prepare(FolderSQL.selectDocumentsOfFolder)
                var sum = 0
                while try folders.step() {
                    let id = folders.int64(0)
                    sum &+= folders.text(1).utf8.count
                    documents.bind(id, at: 1)
                    while try documents.step() { sum &+= FolderSQL.checksum(documents.text(1), documents.int(2), documents.double(3)) }
                    documents.reset()
                }
                return sum
            }
            let (b, prefetched) = try timed { () throws -> Int in
                let folders = try db.prepare(FolderSQL.selectFolders)
                var names: [(Int64, String)] = []
                while try folders.step() { names.append((folders.int64(0), folders.text(1))) }
                let documents = try db.prepare(FolderSQL.selectAllDocuments)
                var byFolder: [Int64: [DocumentData]] = [:]
                while try documents.step() {
                    byFolder[documents.int64(0), default: []].append(DocumentData(id: documents.int64(1), title: documents.text(2), size: documents.int(3), score: documents.double(4)))
                }
                var sum = 0
                for (id, name) in names {
                    sum &+= name.utf8.count
                    for d in byFolder[id] ?? [] { sum &+= FolderSQL.checksum(d.title, d.size, d.score) }
                }
                return sum
            }
            meter?.end()
            blackHole((a, b))
            return ["perParent": perParent, "prefetched": prefetched, "graphInsert": try graphInsert(.raw),
                    "graphInsertToOne": try graphInsert(.raw, viaToOne: true), "parentsInsert": try graphInsert(.raw, parentsAlone: true)]
        case .grdb, .grdbRecord:
            let pool = try BenchSettings.openPool(sqlPath)
            _ = try pool.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM document") }
            let record = contender == .grdbRecord
            meter?.begin()
            let (a, perParent) = try timed {
                try pool.read { db -> Int in
                    var sum = 0
                    if record {
                        for folder in try FolderRecord.order(Column("id")).fetchAll(db) {
                            sum &+= folder.name.utf8.count
                            for d in try DocumentRecord.filter(Column("folderId") == folder.id).order(Column("id")).fetchAll(db) {
                                sum &+= FolderSQL.checksum(d.title, d.size, d.score)
                            }
                        }
                        return sum
                    }
                    let folders = try Row.fetchAll(db.cachedStatement(sql: FolderSQL.selectFolders))
                    let documents = try db.cachedStatement(sql: FolderSQL.selectDocumentsOfFolder)
                    for folder in folders {
                        let id: Int64 = folder[0]
                        sum &+= (folder[1] as String).utf8.count
                        let cursor = try Row.fetchCursor(documents, arguments: [id])
                        while let d = try cursor.next() { sum &+= FolderSQL.checksum(d[1], d[2], d[3]) }
                    }
                    return sum
                }
            }
            let (b, prefetched) = try timed {
                try pool.read { db -> Int in
                    var sum = 0
                    if record {
                        let request = FolderRecord.including(all: FolderRecord.documents).order(Column("id"))
                        for info in try FolderInfo.fetchAll(db, request) {
                            sum &+= info.folder.name.utf8.count
                            for d in info.documents { sum &+= FolderSQL.checksum(d.title, d.size, d.score) }
                        }
                        return sum
                    }
                    let folders = try Row.fetchAll(db.cachedStatement(sql: FolderSQL.selectFolders))
                    var byFolder: [Int64: [DocumentData]] = [:]
                    let cursor = try Row.fetchCursor(db.cachedStatement(sql: FolderSQL.selectAllDocuments))
                    while let d = try cursor.next() {
                        byFolder[d[0], default: []].append(DocumentData(id: d[1], title: d[2], size: d[3], score: d[4]))
                    }
                    for folder in folders {
                        sum &+= (folder[1] as String).utf8.count
                        for d in byFolder[folder[0]] ?? [] { sum &+= FolderSQL.checksum(d.title, d.size, d.score) }
                    }
                    return sum
                }
            }
            meter?.end()
            blackHole((a, b))
            try pool.close()
            return ["perParent": perParent, "prefetched": prefetched]
        case .fluent:
            return try runFluentRound(of: self, round, path: sqlPath)
        case .loom:
            let container = try PersistentContainer.folders(at: loomPath)
            _ = try container.newBackgroundContext(name: "primer").performAndWait { try $0.count(for: FetchRequest<Document>()) }
            meter?.begin()
            // A new context for each, so that the second finds nothing registered.
            let (a, perParent) = try container.newBackgroundContext(name: "W4-faults").performAndWait { context in
                try timed { () throws -> Int in
                    let folders = try context.fetch(FetchRequest<Folder>())
                    return folders.reduce(0) { $0 &+ $1.checksum }
                }
            }
            let (b, prefetched) = try container.newBackgroundContext(name: "W4-prefetch").performAndWait { context in
                try timed { () throws -> Int in
                    var request = FetchRequest<Folder>()
                    request.relationshipKeyPathsForPrefetching = [\.documents]
                    let folders = try context.fetch(request)
                    return folders.reduce(0) { $0 &+ $1.checksum }
                }
            }
            meter?.end()
            blackHole((a, b))
            try container.closeAndWait()
            return ["perParent": perParent, "prefetched": prefetched, "graphInsert": try graphInsert(.loom),
                    "graphInsertToOne": try graphInsert(.loom, viaToOne: true), "parentsInsert": try graphInsert(.loom, parentsAlone: true)]
        }
    }

    func notes(_ result: WorkloadResult) -> [String] {
        ["every contender reads \(Format.count(Self.folders)) folder names and \(Format.count(Self.folders * Self.documentsPerFolder)) documents' title, size and score; per-parent runs 1 + \(Format.count(Self.folders)) queries, prefetched 2"]
    }
}

// MARK: Data

/// A folder of the W4 data set and its documents.
struct FolderData: Sendable {
    var id: Int64
    var name: String
    var documents: [DocumentData]

    /// The seeded data set: `folders` folders with `documentsPerFolder` documents each.
    static func make(folders: Int, documentsPerFolder: Int, seed: UInt64 = 0xF01D_E125) -> [FolderData] {
        var random = SplitMix64(seed: seed)
        var nextDocument: Int64 = 1
        return (1...folders).map { i in
            let documents = (0..<documentsPerFolder).map { _ -> DocumentData in
                defer { nextDocument += 1 }
                return DocumentData(
                    id: nextDocument,
                    title: "\(Dataset.words[random.int(below: Dataset.words.count)]) \(Dataset.words[random.int(below: Dataset.words.count)]) report \(nextDocument)",
                    size: random.int(below: 1_000_000), score: random.unit() * 100)
            }
            return FolderData(id: Int64(i), name: "Folder \(i) \(Dataset.words[random.int(below: Dataset.words.count)]) archive", documents: documents)
        }
    }
}

struct DocumentData: Sendable {
    var id: Int64
    var title: String
    var size: Int
    var score: Double
}

enum FolderSQL {
    static let schema = [
        "CREATE TABLE folder (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
        "CREATE TABLE document (id INTEGER PRIMARY KEY, folderId INTEGER NOT NULL REFERENCES folder(id), title TEXT NOT NULL, size INTEGER NOT NULL, score REAL NOT NULL)",
        "CREATE INDEX document_folderId ON document (folderId)",
    ]
    static let insertFolder = "INSERT INTO folder (id, name) VALUES (?, ?)"
    static let insertDocument = "INSERT INTO document (id, folderId, title, size, score) VALUES (?, ?, ?, ?, ?)"
    static let selectFolders = "SELECT id, name FROM folder ORDER BY id"
    static let selectDocumentsOfFolder = "SELECT id, title, size, score FROM document WHERE folderId = ? ORDER BY id"
    static let selectAllDocuments = "SELECT folderId, id, title, size, score FROM document ORDER BY folderId, id"

    /// What every contender computes from a document's attributes.
    @inline(__always)
    static func checksum(_ title: String, _ size: Int, _ score: Double) -> Int {
        title.utf8.count &+ size &+ Int(score)
    }
}

// MARK: GRDB records

struct FolderRecord: Codable, FetchableRecord, TableRecord {
    static let databaseTableName = "folder"
    static let documents = hasMany(DocumentRecord.self)
    var id: Int64
    var name: String
}

struct DocumentRecord: Codable, FetchableRecord, TableRecord {
    static let databaseTableName = "document"
    var id: Int64
    var folderId: Int64
    var title: String
    var size: Int
    var score: Double
}

/// A folder with its documents, as GRDB's `including(all:)` decodes it.
struct FolderInfo: Decodable, FetchableRecord {
    var folder: FolderRecord
    var documents: [DocumentRecord]
}

// MARK: Loom models

@Model final class Folder {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Document.folder) var documents: Set<Document> = []

    init(name: String) {
        self.name = name
    }

    /// Reads the name and every document's attributes through the generated accessors.
    var checksum: Int {
        documents.reduce(name.utf8.count) { $0 &+ FolderSQL.checksum($1.title, $1.size, $1.score) }
    }
}

@Model final class Document {
    var title: String
    var size: Int
    var score: Double
    var folder: Folder?

    init(title: String, size: Int, score: Double) {
        self.title = title
        self.size = size
        self.score = score
    }
}

extension PersistentContainer {
    /// The W4 store at `path`.
    static func folders(at path: String) throws -> PersistentContainer {
        try PersistentContainer(name: "LoomBenchW4", for: Folder.self, Document.self, location: .file(URL(filePath: path)))
    }
}
