import Foundation

// Fluent's side of W1, W2, W3, W4, W5, W9 and of their PostgreSQL versions. Each workload's
// `measure` hands its `.fluent` case here; only a build that links Fluent (Benchmarks/Package.swift)
// has the rounds, Loom's own package (CI's smoke round) lists no Fluent contender.
//
// Fluent's idiomatic paths, the futures waited for on the calling thread:
// - W1: `[Model].create(on:)` batches of 1,000 in one transaction (Fluent's bulk insert);
// - W2: `Model.query(on:).sort(\.$id).all()`; Fluent has no faults, so (a) and (b) decode every
//   row as GRDB's do, (b) also reads every attribute;
// - W3: the query builder, `filter` × 3 and `sort` × 2, per query;
// - W4: `folder.$documents.query(on:)` per folder, and eager loading, `with(\.$documents)`;
// - W5: `model.save(on:)` (an `UPDATE` of the changed fields) per changed model, one transaction;
//   Fluent keeps no unit of work, so there is no "empty save";
// - W9: `model.create(on:)` per object, autocommitted.

#if canImport(FluentKit)
import FluentKit

/// A workload with a Fluent round.
@MainActor
protocol FluentWorkload {
    /// One Fluent round; `path` is the workload's SQLite file for this round, if it made one
    /// (a fresh path, or a copy of the populated store that raw SQLite and GRDB read).
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double]
}

/// `workload`'s Fluent round.
@MainActor
func runFluentRound(of workload: any Workload, _ round: Round, path: String?) throws -> [String: Double] {
    guard let workload = workload as? any FluentWorkload else { throw BenchError("\(workload.id) has no Fluent round") }
    return try workload.fluentRound(round, path: path)
}

/// W9's Fluent saves: `count` objects, each `create(on:)` timed alone.
@MainActor
func fluentSingleSaves(path: String, full: Bool, items: ArraySlice<ItemData>) throws -> [Double] {
    let store = try FluentStore(sqlite: path, synchronous: full ? "FULL" : "NORMAL")
    defer { store.close() }
    try store.createSQLiteItemTable()
    return try SingleObjectSaves.fluentSaves(store, items)
}

extension Bench {
    /// Opens Fluent on a copy of the populated SQLite store that raw SQLite and GRDB read: the
    /// same rows, the date column renamed to the model's `created_at` first (untimed).
    func fluentStore(onPopulatedCopy path: String?) throws -> FluentStore {
        guard let path else { throw BenchError("no populated copy for Fluent") }
        try RawDatabase(path: path).execute("ALTER TABLE Item RENAME COLUMN createdAt TO created_at")
        return try FluentStore(sqlite: path)
    }

    /// Fluent on the PostgreSQL schema `schemaName`.
    func fluentPostgres(_ schemaName: String) throws -> FluentStore {
        try FluentStore(postgres: try requirePostgresURL(), schemaName: schemaName)
    }

    /// Fluent on a new schema `schemaName` with an empty item table, made as the raw
    /// contender's (the caller drops it).
    func fluentPostgres(creating schemaName: String) throws -> FluentStore {
        let connection = try rawPostgres(schemaName)
        defer { connection.close() }
        try connection.createSchema()
        return try fluentPostgres(schemaName)
    }
}

// MARK: SQLite

extension InsertAndSave: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        guard let path else { throw BenchError("W1 needs a path") }
        let store = try FluentStore(sqlite: path)
        defer { store.close() }
        try store.createSQLiteItemTable()
        let (create, save) = try Self.fluentRound(store, items, round.meter)
        return ["create": create, "save": save, "total": create + save]
    }

    /// Fluent's W1 (and PG-W1) round: models made, then inserted in batches in one transaction.
    static func fluentRound(_ store: FluentStore, _ items: [ItemData], _ meter: HeapMeter?) throws -> (create: Double, save: Double) {
        meter?.begin()
        let (models, create) = timed { items.map(FluentItem.init) }
        let (_, save) = try timed { try store.insertInBatches(models) }
        meter?.end()
        blackHole(models)
        return (create, save)
    }
}

extension FetchAll: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        let store = try bench.fluentStore(onPopulatedCopy: path)
        defer { store.close() }
        return try Self.fluentRound(store, round.meter)
    }

    /// Fluent's W2 (and PG-W2) round, after one untimed query.
    static func fluentRound(_ store: FluentStore, _ meter: HeapMeter?) throws -> [String: Double] {
        _ = try FluentItem.query(on: store.database).count().wait()
        var result: [String: Double] = [:]
        meter?.begin()
        for (key, reads) in [("a.cold", false), ("a.warm", false), ("b.cold", true), ("b.warm", true), ("b.faults", true)] {
            let (value, time) = try timed { () throws -> Int in
                let models = try FluentItem.query(on: store.database).sort(\.$id).all().wait()
                return reads ? models.checksum : models.count
            }
            blackHole(value)
            result[key] = time
        }
        meter?.end()
        return result
    }
}

extension RangeQueries: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        let store = try bench.fluentStore(onPopulatedCopy: path)
        defer { store.close() }
        return try Self.fluentQueries(store, bench.dataset.queries, round.meter)
    }

    /// Fluent's W3 (and PG-W3) queries, each timed, after one untimed query.
    static func fluentQueries(_ store: FluentStore, _ queries: [RangeQuery], _ meter: HeapMeter?) throws -> [String: Double] {
        _ = try FluentItem.query(on: store.database).count().wait()
        var times: [Double] = []
        times.reserveCapacity(queries.count)
        var rows = 0
        meter?.begin()
        for query in queries {
            let start = monotonicNanoseconds()
            let models = try FluentItem.matching(query, on: store.database).all().wait()
            blackHole(models.checksum)
            times.append(seconds(since: start))
            rows += models.count
        }
        meter?.end()
        let sorted = times.sorted()
        return [
            "p50": Statistics.percentile(sorted: sorted, 0.5),
            "p99": Statistics.percentile(sorted: sorted, 0.99),
            "total": times.reduce(0, +),
            "rows": Double(rows) / Double(max(queries.count, 1)),
        ]
    }
}

extension ToManyFaulting: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        guard let path else { throw BenchError("W4 needs its store") }
        let store = try FluentStore(sqlite: path)
        defer { store.close() }
        let db = store.database
        _ = try FluentDocument.query(on: db).count().wait()
        round.meter?.begin()
        let (a, perParent) = try timed { () throws -> Int in
            var sum = 0
            for folder in try FluentFolder.query(on: db).sort(\.$id).all().wait() {
                sum &+= folder.name.utf8.count
                for d in try folder.$documents.query(on: db).sort(\.$id).all().wait() {
                    sum &+= FolderSQL.checksum(d.title, d.size, d.score)
                }
            }
            return sum
        }
        let (b, prefetched) = try timed { () throws -> Int in
            var sum = 0
            for folder in try FluentFolder.query(on: db).with(\.$documents).sort(\.$id).all().wait() {
                sum &+= folder.name.utf8.count
                for d in folder.documents { sum &+= FolderSQL.checksum(d.title, d.size, d.score) }
            }
            return sum
        }
        round.meter?.end()
        blackHole((a, b))
        return ["perParent": perParent, "prefetched": prefetched]
    }
}

extension ChangeAndSave: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        let store = try bench.fluentStore(onPopulatedCopy: path)
        defer { store.close() }
        return try Self.fluentRound(store, changed: Array(stride(from: 0, to: bench.sizes.objects, by: 10)),
                                    titles: bench.dataset.newTitles, meter: round.meter)
    }

    /// Fluent's W5 (and PG-W5) round: every model loaded (untimed), the changes set on the
    /// models, each changed model saved in one transaction.
    static func fluentRound(_ store: FluentStore, changed: [Int], titles: [String], meter: HeapMeter?) throws -> [String: Double] {
        let models = try FluentItem.query(on: store.database).sort(\.$id).all().wait()
        meter?.begin()
        let (_, change) = timed {
            for (j, i) in changed.enumerated() {
                models[i].score += 1
                models[i].title = titles[j]
            }
        }
        let (_, save) = try timed { try store.saveInTransaction(changed.map { models[$0] }) }
        meter?.end()
        blackHole(models)
        return ["change": change, "save": save, "total": change + save]
    }
}

extension SingleObjectSaves {
    /// Fluent's W9 (and PG-W9) saves, each timed alone, creating the model included.
    static func fluentSaves(_ store: FluentStore, _ items: ArraySlice<ItemData>) throws -> [Double] {
        var latencies: [Double] = []
        latencies.reserveCapacity(items.count)
        for item in items {
            let start = monotonicNanoseconds()
            try FluentItem(item).create(on: store.database).wait()
            latencies.append(seconds(since: start))
        }
        return latencies
    }
}

// MARK: PostgreSQL

extension PostgreSQLInsertAndSave: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        let schemaName = bench.newPostgresSchemaName("w1_fluent")
        defer { try? bench.dropPostgresSchema(schemaName) }
        let store = try bench.fluentPostgres(creating: schemaName)
        defer { store.close() }
        let items = bench.dataset.items
        let (create, save) = try InsertAndSave.fluentRound(store, items, round.meter)
        // BEGIN, one INSERT per batch of 1,000, COMMIT.
        return ["create": create, "save": save, "total": create + save, "statements": Double((items.count + 999) / 1_000 + 2)]
    }
}

extension PostgreSQLFetchAll: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        let store = try bench.fluentPostgres(try bench.populatedPostgresSchema(for: .fluent))
        defer { store.close() }
        return try FetchAll.fluentRound(store, round.meter)
    }
}

extension PostgreSQLRangeQueries: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        let store = try bench.fluentPostgres(try bench.populatedPostgresSchema(for: .fluent))
        defer { store.close() }
        var result = try RangeQueries.fluentQueries(store, bench.dataset.queries, round.meter)
        result["rows"] = nil
        return result
    }
}

extension PostgreSQLChangeAndSave: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        // The populated schema, changed in place, as the other contenders' are.
        let store = try bench.fluentPostgres(try bench.populatedPostgresSchema(for: .fluent))
        defer { store.close() }
        let changed = Array(stride(from: 0, to: bench.sizes.objects, by: 10))
        var result = try ChangeAndSave.fluentRound(store, changed: changed, titles: bench.dataset.newTitles, meter: round.meter)
        // BEGIN, one UPDATE per changed model, COMMIT.
        result["statements"] = Double(changed.count + 2)
        return result
    }
}

extension PostgreSQLSingleObjectSaves: FluentWorkload {
    func fluentRound(_ round: Round, path: String?) throws -> [String: Double] {
        let schemaName = bench.newPostgresSchemaName("w9_fluent")
        defer { try? bench.dropPostgresSchema(schemaName) }
        let store = try bench.fluentPostgres(creating: schemaName)
        defer { store.close() }
        round.meter?.begin()
        let latencies = try SingleObjectSaves.fluentSaves(store, bench.dataset.items.prefix(bench.sizes.singleSavesNormal))
        round.meter?.end()
        let sorted = latencies.sorted()
        return ["p50": Statistics.percentile(sorted: sorted, 0.5), "p99": Statistics.percentile(sorted: sorted, 0.99), "statements": 1]
    }
}

#else

/// This build has no Fluent: no workload lists it as a contender, so this is never called.
@MainActor
func runFluentRound(of workload: any Workload, _ round: Round, path: String?) throws -> [String: Double] {
    throw BenchError("this build has no Fluent (Benchmarks/Package.swift links it)")
}

@MainActor
func fluentSingleSaves(path: String, full: Bool, items: ArraySlice<ItemData>) throws -> [Double] {
    throw BenchError("this build has no Fluent (Benchmarks/Package.swift links it)")
}
#endif
