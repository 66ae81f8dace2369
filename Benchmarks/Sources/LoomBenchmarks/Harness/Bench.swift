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
    private var templates: [String: String] = [:]
    private var fileCounter = 0

    init(sizes: Sizes, directory: URL) {
        self.sizes = sizes
        self.directory = directory
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
            for item in dataset.items { context.insert(Item(item)) }
            try context.save()
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
    }
}
