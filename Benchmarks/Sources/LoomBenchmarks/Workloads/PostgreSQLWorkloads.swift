import Foundation
import Loom
import Synchronization

// W1, W2, W3, W5 and W9 on PostgreSQL (`--postgres URL`): Loom's PostgreSQL store against raw
// postgres-nio (``RawPostgres``: hand-written statements, rows decoded by hand), on the same
// server in the same run. Loom's side of each round is the SQLite workload's own code on a
// PostgreSQL container; `raw` and `loom` keep their keys, so ratios and targets read as usual.
//
// Every round of a writing workload gets a new PostgreSQL schema (namespace), dropped after it;
// the reading ones share one populated schema per contender, built once per run.

/// What the PostgreSQL workloads share: the server, availability, contenders and their labels.
@MainActor
class PostgreSQLWorkloadBase {
    /// `--postgres`: without it, the workload is unavailable.
    let postgresURL: String?
    var bench: Bench!

    init(postgresURL: String?) { self.postgresURL = postgresURL }

    var contenders: [Contender] { [.raw] + fluentContenders + [.loom] }

    var unavailableReason: String? { Self.unavailableReason(postgresURL) }

    func label(for contender: Contender) -> String { Self.label(for: contender) }

    /// Why a PostgreSQL workload cannot run without a server (shared with PG-W14).
    nonisolated static func unavailableReason(_ postgresURL: String?) -> String? {
        postgresURL == nil ? "needs --postgres URL (scripts/postgres-cluster start DIR prints one for a throwaway server)" : nil
    }

    /// The contenders' names on PostgreSQL (shared with PG-W14).
    nonisolated static func label(for contender: Contender) -> String {
        switch contender {
        case .raw: "postgres-nio"
        case .fluent: "Fluent on PG"
        default: "Loom on PG"
        }
    }

    /// Keeps `bench` and builds both populated schemas, so that no round pays for them.
    func preparePopulated(_ bench: Bench) throws {
        self.bench = bench
        for contender in contenders { _ = try bench.populatedPostgresSchema(for: contender) }
    }
}

/// Counts the statements a store runs, from its `trace`.
final class StatementCounter: Sendable {
    private let value = Mutex(0)
    var count: Int { value.withLock { $0 } }
    var trace: @Sendable (String) -> Void { { [self] _ in value.withLock { $0 += 1 } } }
    func reset() { value.withLock { $0 = 0 } }
}

/// PG-W1: insert M objects and save once, into a new schema each round.
final class PostgreSQLInsertAndSave: PostgreSQLWorkloadBase, SynchronousWorkload {
    let id = "PG-W1"
    var title = "W1 on PostgreSQL: insert M objects and save once (new schema each round)"
    let metrics = [
        Metric(key: "create", label: "create"),
        Metric(key: "save", label: "save"),
        Metric(key: "total", label: "create + save", target: .ratioToRaw(1.5)),
        Metric(key: "statements", label: "statements of the save", unit: .count),
    ]
    private var items: [ItemData] = []

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        items = bench.dataset.items
        title = "W1 on PostgreSQL: insert \(Format.count(items.count)) objects and save once (new schema each round)"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let schemaName = bench.newPostgresSchemaName("w1_\(contender.rawValue)")
        defer { try? bench.dropPostgresSchema(schemaName) }
        let items = self.items
        switch contender {
        case .fluent:
            return try runFluentRound(of: self, round, path: nil)
        case .loom:
            let counter = StatementCounter()
            let container = try bench.loomPostgres(schemaName, trace: counter.trace)
            counter.reset()
            let (create, save) = try InsertAndSave.loomRound(container, items, round.meter)
            return ["create": create, "save": save, "total": create + save, "statements": Double(counter.count)]
        default:
            let connection = try bench.rawPostgres(schemaName)
            defer { connection.close() }
            try connection.createSchema()
            round.meter?.begin()
            let (rows, create) = timed { items.map { $0 } }
            let (_, save) = try timed {
                try connection.query("BEGIN")
                try connection.insert(rows)
                try connection.query("COMMIT")
            }
            round.meter?.end()
            return ["create": create, "save": save, "total": create + save, "statements": Double((rows.count + 9_999) / 10_000 + 2)]
        }
    }
}

/// PG-W2: fetch all M objects, as faults and reading every attribute.
final class PostgreSQLFetchAll: PostgreSQLWorkloadBase, SynchronousWorkload {
    let id = "PG-W2"
    var title = "W2 on PostgreSQL: fetch all M objects"
    let metrics = [
        Metric(key: "a.cold", label: "(a) faults, cold", target: .ratioToRaw(1.5)),
        Metric(key: "a.warm", label: "(a) faults, warm", target: .ratioToRaw(1.5)),
        Metric(key: "b.cold", label: "(b) read all, cold", target: .ratioToRaw(1.5)),
        Metric(key: "b.warm", label: "(b) read all, warm", target: .ratioToRaw(1.5)),
        Metric(key: "b.faults", label: "(b) via faults, cold", target: .ratioToRaw(2)),
    ]
    func prepare(_ bench: Bench) throws {
        try preparePopulated(bench)
        title = "W2 on PostgreSQL: fetch all \(Format.count(bench.sizes.objects)) objects: (a) as faults, (b) reading every attribute"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let schemaName = try bench.populatedPostgresSchema(for: contender)
        switch contender {
        case .fluent:
            return try runFluentRound(of: self, round, path: nil)
        case .loom:
            return try FetchAll.loomRound(try bench.loomPostgres(schemaName), round.meter)
        default:
            // As raw SQLite in W2: no objects to keep, every fetch decodes every row.
            let connection = try bench.rawPostgres(schemaName)
            defer { connection.close() }
            _ = try connection.count()
            var result: [String: Double] = [:]
            round.meter?.begin()
            for key in ["a.cold", "a.warm", "b.cold", "b.warm", "b.faults"] {
                let (items, time) = try timed { () throws -> [ItemData] in
                    let items = try connection.selectAll()
                    if key.hasPrefix("b") { blackHole(items.checksum) }
                    return items
                }
                blackHole(items)
                result[key] = time
            }
            round.meter?.end()
            return result
        }
    }
}

/// PG-W3: 1,000 different predicate + sort queries, ~50 rows each.
final class PostgreSQLRangeQueries: PostgreSQLWorkloadBase, SynchronousWorkload {
    let id = "PG-W3"
    let title = "W3 on PostgreSQL: 1,000 different predicate + sort queries, ~50 rows each, every attribute read"
    let metrics = [
        Metric(key: "p50", label: "query p50", target: .ratioToRaw(1.5)),
        Metric(key: "p99", label: "query p99"),
        Metric(key: "total", label: "1,000 queries"),
    ]
    func prepare(_ bench: Bench) throws {
        try preparePopulated(bench)
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let schemaName = try bench.populatedPostgresSchema(for: contender)
        let queries = bench.dataset.queries
        var times: [Double] = []
        times.reserveCapacity(queries.count)
        switch contender {
        case .fluent:
            return try runFluentRound(of: self, round, path: nil)
        case .loom:
            try RangeQueries.loomQueries(try bench.loomPostgres(schemaName), queries, pinned: false, meter: round.meter) { time, _ in
                times.append(time)
            }
        default:
            let connection = try bench.rawPostgres(schemaName)
            defer { connection.close() }
            _ = try connection.count()
            round.meter?.begin()
            for query in queries {
                let start = monotonicNanoseconds()
                let items = try connection.select(matching: query)
                blackHole(items.checksum)
                times.append(seconds(since: start))
            }
            round.meter?.end()
        }
        let sorted = times.sorted()
        return [
            "p50": Statistics.percentile(sorted: sorted, 0.5),
            "p99": Statistics.percentile(sorted: sorted, 0.99),
            "total": times.reduce(0, +),
        ]
    }
}

/// PG-W5: change 2 attributes on 10% of M loaded objects and save; empty saves.
final class PostgreSQLChangeAndSave: PostgreSQLWorkloadBase, SynchronousWorkload {
    let id = "PG-W5"
    var title = "W5 on PostgreSQL: change 2 attributes on 10% of M objects and save"
    let metrics = [
        Metric(key: "change", label: "change"),
        Metric(key: "save", label: "save"),
        Metric(key: "total", label: "change + save", target: .ratioToRaw(3)),
        Metric(key: "statements", label: "statements of the save", unit: .count),
        Metric(key: "empty", label: "empty save (per call)", target: .median(50e-6)),
    ]
    func prepare(_ bench: Bench) throws {
        try preparePopulated(bench)
        title = "W5 on PostgreSQL: change 2 attributes on \(Format.count(bench.sizes.objects / 10)) of \(Format.count(bench.sizes.objects)) loaded objects and save; empty save"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        // The populated schema, changed in place: every round changes the same objects again.
        let schemaName = try bench.populatedPostgresSchema(for: contender)
        let titles = bench.dataset.newTitles
        let changed = Array(stride(from: 0, to: bench.sizes.objects, by: 10))
        switch contender {
        case .fluent:
            return try runFluentRound(of: self, round, path: nil)
        case .loom:
            let counter = StatementCounter()
            let container = try bench.loomPostgres(schemaName, trace: counter.trace)
            // Counted from the fetch on: the round's statements are the fetch and the save.
            counter.reset()
            var result = try ChangeAndSave.loomRound(container, changed: changed, titles: titles, meter: round.meter, emptySaves: 1_000)
            result["statements"] = Double(counter.count - 1)
            return result
        default:
            let connection = try bench.rawPostgres(schemaName)
            defer { connection.close() }
            var items = try connection.selectAll()
            round.meter?.begin()
            let (_, change) = timed {
                for (j, i) in changed.enumerated() {
                    items[i].score += 1
                    items[i].title = titles[j]
                }
            }
            let (_, save) = try timed {
                try connection.updateScoreAndTitle(changed.map { items[$0] })
            }
            round.meter?.end()
            blackHole(items)
            return ["change": change, "save": save, "total": change + save, "statements": 1]
        }
    }
}

/// PG-W9: single-object saves, each its own transaction.
final class PostgreSQLSingleObjectSaves: PostgreSQLWorkloadBase, SynchronousWorkload {
    let id = "PG-W9"
    var title = "W9 on PostgreSQL: single-object saves"
    let metrics = [
        Metric(key: "p50", label: "save p50"),
        Metric(key: "p99", label: "save p99"),
        Metric(key: "statements", label: "statements per save", unit: .count),
    ]

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        title = "W9 on PostgreSQL: \(Format.count(bench.sizes.singleSavesNormal)) single-object saves (new schema each round)"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let schemaName = bench.newPostgresSchemaName("w9_\(contender.rawValue)")
        defer { try? bench.dropPostgresSchema(schemaName) }
        let items = bench.dataset.items.prefix(bench.sizes.singleSavesNormal)
        let latencies: [Double]
        var statements = 1.0
        round.meter?.begin()
        switch contender {
        case .fluent:
            return try runFluentRound(of: self, round, path: nil)
        case .loom:
            let counter = StatementCounter()
            let container = try bench.loomPostgres(schemaName, trace: counter.trace)
            counter.reset()
            latencies = try SingleObjectSaves.loomSaves(container, items)
            statements = Double(counter.count) / Double(items.count)
        default:
            let connection = try bench.rawPostgres(schemaName)
            defer { connection.close() }
            try connection.createSchema()
            var times: [Double] = []
            times.reserveCapacity(items.count)
            for item in items {
                let start = monotonicNanoseconds()
                try connection.insertOne(item)
                times.append(seconds(since: start))
            }
            latencies = times
        }
        round.meter?.end()
        let sorted = latencies.sorted()
        return ["p50": Statistics.percentile(sorted: sorted, 0.5), "p99": Statistics.percentile(sorted: sorted, 0.99), "statements": statements]
    }
}
