import Foundation
import GRDB
import Loom

/// The sizes a run uses; `--quick` shrinks them.
struct Sizes: Codable, Sendable {
    /// Objects in the populated stores (M).
    var objects: Int
    /// Objects W7's background context imports, in saves of `importBatch`.
    var importObjects: Int
    var importBatch: Int
    /// ID lookups and queries each W8 reader runs.
    var lookupsPerReader: Int
    var queriesPerReader: Int
    /// Single-object saves in W9, with synchronous NORMAL and FULL.
    var singleSavesNormal: Int
    var singleSavesFull: Int

    static let standard = Sizes(
        objects: 100_000, importObjects: 200_000, importBatch: 1_000,
        lookupsPerReader: 10_000, queriesPerReader: 300, singleSavesNormal: 1_000, singleSavesFull: 1_000)
    static let quick = Sizes(
        objects: 10_000, importObjects: 40_000, importBatch: 1_000,
        lookupsPerReader: 2_000, queriesPerReader: 100, singleSavesNormal: 1_000, singleSavesFull: 200)
}

/// What every workload shares: sizes, the seeded data, a scratch folder, and populated
/// template stores that rounds copy instead of rebuilding.
@MainActor
final class Bench {
    let sizes: Sizes
    let dataset: Dataset
    let directory: URL
    /// The server of the PostgreSQL workloads (`--postgres`), or `nil`: they are skipped.
    let postgresURL: String?
    private var templates: [String: String] = [:]
    private var postgresTemplates: [String: String] = [:]
    private var fileCounter = 0
    /// The primary key of each object of Loom's template, in the order of `dataset.items`:
    /// the item with id `i` has `loomKeys[i - 1]`. Loom hands out keys in blocks and may skip
    /// some (a block reserved ahead and one reserved on demand can cross; keys are never
    /// reused, so gaps are harmless), so they are 1...count only most of the time. A workload
    /// that finds Loom's objects by a dataset id maps it with ``loomKey(ofItem:)``.
    private var loomKeys: [Int64] = []

    init(sizes: Sizes, directory: URL, postgresURL: String? = nil) {
        self.sizes = sizes
        self.directory = directory
        self.postgresURL = postgresURL
        self.dataset = Dataset(count: sizes.objects)
    }

    /// A path for a new database file in the scratch folder.
    func newDatabasePath(_ tag: String) -> String {
        fileCounter += 1
        return directory.appending(path: "\(tag)-\(fileCounter).sqlite").path
    }

    /// Deletes a database file and its WAL and shared-memory files.
    func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// A fresh copy of the populated store for `contender` (M objects), for one round.
    ///
    /// The templates are built once: the raw and GRDB contenders share one made with the C API;
    /// Loom's is made by Loom. Both are checkpointed and closed, so the copy is the whole store.
    func populatedCopy(for contender: Contender, tag: String) throws -> String {
        let kind = contender == .loom ? "loom" : "sql"
        let template = try templates[kind] ?? makeTemplate(loom: contender == .loom)
        templates[kind] = template
        let path = newDatabasePath(tag)
        try FileManager.default.copyItem(atPath: template, toPath: path)
        return path
    }

    /// The primary key of the item with dataset id `id` in Loom's template (and its copies).
    /// Builds the template first if needed.
    func loomKey(ofItem id: Int64) throws -> Int64 {
        if templates["loom"] == nil { templates["loom"] = try makeTemplate(loom: true) }
        return loomKeys[Int(id - 1)]
    }

    /// Builds both templates now, in a workload's `prepare`, so that no round pays for them.
    func prepareTemplates() throws {
        if templates["sql"] == nil { templates["sql"] = try makeTemplate(loom: false) }
        if templates["loom"] == nil { templates["loom"] = try makeTemplate(loom: true) }
    }

    private func makeTemplate(loom: Bool) throws -> String {
        let path = newDatabasePath(loom ? "template-loom" : "template-sql")
        if loom {
            let container = try PersistentContainer.bench(at: path)
            let context = container.viewContext
            let objects = dataset.items.map(Item.init)
            for object in objects { context.insert(object) }
            try context.save()
            loomKeys = objects.map(\.objectID.primaryKey)
            try container.closeAndWait()
        } else {
            let db = try RawDatabase(path: path)
            try db.createSchema()
            try db.insert(dataset.items)
        }
        // Fold the WAL into the file, so that copying the file copies the store.
        let db = try RawDatabase(path: path)
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return path
    }

    /// Removes the templates (at the end of the run).
    func removeTemplates() {
        for path in templates.values { remove(path) }
        templates = [:]
        for schemaName in postgresTemplates.values { try? dropPostgresSchema(schemaName) }
        postgresTemplates = [:]
    }

    // MARK: PostgreSQL

    /// A name for a new PostgreSQL schema (namespace) of this run.
    func newPostgresSchemaName(_ tag: String) -> String {
        fileCounter += 1
        return "loom_bench_\(ProcessInfo.processInfo.processIdentifier)_\(tag)_\(fileCounter)".lowercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The `--postgres` URL; the PostgreSQL workloads are unavailable without it.
    func requirePostgresURL() throws -> String {
        guard let postgresURL else { throw BenchError("no --postgres URL") }
        return postgresURL
    }

    /// A raw connection whose search path is `schemaName`.
    func rawPostgres(_ schemaName: String) throws -> RawPostgres {
        try RawPostgres(url: try requirePostgresURL(), schemaName: schemaName)
    }

    /// A container of Loom's PostgreSQL store in `schemaName` (created when missing).
    func loomPostgres(_ schemaName: String, trace: (@Sendable (String) -> Void)? = nil) throws -> PersistentContainer {
        try PersistentContainer.bench(postgres: try requirePostgresURL(), schemaName: schemaName, trace: trace)
    }

    func dropPostgresSchema(_ schemaName: String) throws {
        let connection = try rawPostgres(schemaName)
        defer { connection.close() }
        try connection.dropSchema()
    }

    /// The populated schema (M objects) of `contender` on the PostgreSQL server, built once per
    /// run: the raw one with postgres-nio, Loom's by Loom, Fluent's as the raw one (a schema of
    /// its own, since PG-W5 changes it in place). Rounds read it, or change it in place
    /// (a schema cannot be copied as cheaply as a file).
    func populatedPostgresSchema(for contender: Contender) throws -> String {
        let kind = contender == .loom ? "loom" : contender == .fluent ? "fluent" : "raw"
        if let schemaName = postgresTemplates[kind] { return schemaName }
        let schemaName = newPostgresSchemaName("template_\(kind)")
        if contender == .loom {
            let container = try loomPostgres(schemaName)
            let context = container.viewContext
            for item in dataset.items { context.insert(Item(item)) }
            try context.save()
            try container.closeAndWait()
        } else {
            let connection = try rawPostgres(schemaName)
            defer { connection.close() }
            try connection.createSchema()
            try connection.insert(dataset.items)
        }
        let connection = try rawPostgres(schemaName)
        defer { connection.close() }
        try connection.query("ANALYZE")
        postgresTemplates[kind] = schemaName
        return schemaName
    }
}
